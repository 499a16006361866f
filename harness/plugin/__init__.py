"""How plain `lm_eval` finds and checks us: discovery (`discovery`), the task index, the preflight before any model
loads (`preflight`, `metadata`), the results we finish (`finish_results`), lm-eval from Python (`in_process`) and
`lch eval` (`lm_eval_cli`). It imports the engines and the tasks; they import nothing of it."""
