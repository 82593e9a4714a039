"""``coevo train``: a trainer that learns from the hand-off, on a PEFT LoRA adapter of a Hugging Face causal LM.

It consumes the folder transport exactly as any trainer would
(:class:`~coevo.arena.run.consumer.BatchConsumer`: every batch once, in
order, across a ``kill -9`` of either side), takes optimizer steps on a LoRA
adapter with a clipped, importance-weighted policy-gradient loss on each
batch's token ids, loss masks and advantages, against the behaviour policy's
recorded log-probs (:mod:`~coevo.arena.run.train.objective`), saves each
version as a PEFT adapter folder vLLM loads, and announces it.

* :mod:`~coevo.arena.run.train.settings`: every knob and its default (no torch);
* :mod:`~coevo.arena.run.train.sequences`: a batch's rows as training
  sequences (no torch);
* :mod:`~coevo.arena.run.train.objective`: the loss;
* :mod:`~coevo.arena.run.train.policy`: the model, its adapter, the optimizer's
  state, the log-probs of a sequence;
* :mod:`~coevo.arena.run.train.learner`: the trainer (``coevo train``) and the
  log-prob check (``coevo logprobs``).

``torch``, ``transformers`` and ``peft`` come with the ``train`` extra
(``pip install 'coevo[train]'``); only the last three modules import them.
"""
