"""How plain `lm_eval` finds and checks us: discovery of our tasks and models (`discovery`, `registration`), the
task index, the preflight that runs before any model loads (`preflight`, `metadata`), our aggregations and the
results we finish (`aggregations`), running lm-eval from Python (`run`) and `lch eval` (`lm_eval_cli`)."""
