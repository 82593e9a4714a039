"""The ``claude*`` roles and client: the LLM roles (:mod:`coevo.agents.llm`) with Anthropic as the default provider.

* :mod:`coevo.agents.claude.roles`: ``ClaudeSolver``, ``ClaudeSynthesizer``,
  ``ClaudeJudge``, ``ClaudeWorldModel``;
* :mod:`coevo.agents.claude.client`: ``ClaudeClient`` and the names older code imports.
"""
