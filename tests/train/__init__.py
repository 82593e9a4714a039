"""The trainer's own tests (``coevo train``): they need torch, transformers and peft (the train extra).

The core test environment has none of them; these run in the real-model
environment (:mod:`tests.real_model`), started by
``tests/arena/test_real_model.py::test_the_trainer_s_own_tests_pass_in_the_training_environment``,
and are collected directly wherever torch is installed.
"""
