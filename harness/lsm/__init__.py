"""Long-short misalignment (paper 001): SCE and its length law (`formulas`, pure) and the estimators that run
a model (`estimator`)."""
