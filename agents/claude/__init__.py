"""Claude roles (the anthropic SDK): the real backend for solving, with the client plumbing they share.

* :mod:`coevo.agents.claude.client`: :class:`ClaudeClient` (key from the
  environment, concurrency limit, the SDK's retries, prompt caching, token
  and dollar accounting, structured output through a forced tool);
* :mod:`coevo.agents.claude.solver`: :class:`ClaudeSolver`, a multi-turn
  tool-use agent that returns Episodes like any Solver.
"""
