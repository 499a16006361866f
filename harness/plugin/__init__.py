"""The seam with lm-eval: discovery (`discovery`), the one door every run passes (`preflight`: lm-eval's
`simple_evaluate`, with the checks of what is ours, `metadata` and `task_index`), lm-eval's own command line in front
of it (`command_line`), the results we finish (`finish_results`) and lm-eval from Python (`in_process`). It imports
the engines and the tasks; they import nothing of it."""
