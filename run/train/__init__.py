"""``coevo train``: a trainer that learns from the hand-off, on a PEFT LoRA adapter of a Hugging Face causal LM.

It consumes the folder transport exactly as any trainer would
(:class:`~coevo.run.handoff.consumer.BatchConsumer`: every batch once, in
order, across a ``kill -9`` of either side), takes optimizer steps on a LoRA
adapter with a clipped, importance-weighted policy-gradient loss on each
batch's token ids, loss masks and advantages, against the behaviour policy's
recorded log-probs (:mod:`~coevo.run.train.objective`), saves each
version as a PEFT adapter folder vLLM loads, and announces it.

* :mod:`~coevo.run.train.settings`: every knob and its default (no torch);
* :mod:`~coevo.run.train.sequences`: a batch's rows as training
  sequences (no torch);
* :mod:`~coevo.run.train.objective`: the loss;
* :mod:`~coevo.run.train.policy`: the model, its adapter, the optimizer's
  state, the log-probs of a sequence;
* :mod:`~coevo.run.train.learner`: the trainer (``coevo train``) and the
  log-prob check (``coevo logprobs``).

``torch``, ``transformers`` and ``peft`` come with the ``train`` extra
(``pip install 'coevo[train]'``); only the last three modules import them.
"""
