"""LLM roles on any provider: one set of role implementations over one client layer.

* :mod:`coevo.agents.llm.client`: :class:`~coevo.agents.llm.client.LLMClient`
  (servers and their concurrency limits, the key from a named variable, one
  retry policy, accounting, structured output through a forced tool);
* :mod:`coevo.agents.llm.openai_api` and :mod:`coevo.agents.llm.anthropic_api`:
  the two providers (any Chat Completions server: OpenAI, vLLM, SGLang,
  Ollama; and Anthropic's Messages API);
* :mod:`coevo.agents.llm.role`: the settings every LLM role takes;
* the roles: :class:`~coevo.agents.llm.solver.LLMSolver` (``llm-solver``),
  :class:`~coevo.agents.llm.synthesizer.LLMSynthesizer` (``llm-synth``),
  :class:`~coevo.agents.llm.judge.LLMJudge` (``llm-judge``),
  :class:`~coevo.agents.llm.world_model.LLMWorldModel` (``llm-world-model``);
  the ``claude*`` roles are the same classes with Anthropic as the default
  provider (:mod:`coevo.agents.claude`).
"""
