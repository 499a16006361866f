"""How plain `lm_eval` finds and checks us: discovery of our tasks and models (`discovery`), the task index, the
preflight that runs before any model loads (`preflight`, `metadata`), the results we finish (`finish_results`),
running lm-eval from Python (`in_process`) and `lch eval` (`lm_eval_cli`). The glue imports the engines and the
tasks; they import nothing of it (the model registry is `harness.engines.registry`)."""
