"""How plain `lm_eval` finds and checks us: discovery of our tasks and models (`discovery`, `registration`), the
task index, the preflight that runs before any model loads (`preflight`, `metadata`), our aggregations
(`aggregations`), the results we finish (`finish_results`) and what a failed service left out (`incomplete`),
running lm-eval from Python (`in_process`) and `lch eval` (`lm_eval_cli`)."""
