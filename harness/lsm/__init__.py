"""Long-short misalignment (the LSM paper): SCE and its length law (`formulas`, pure) and the estimators that run
a model (`estimator`)."""

LAYER = "pure"  # harness/devtools/layers.py
