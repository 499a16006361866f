"""LongPPL (the LongPPL paper) end to end: the formulas (`formulas`, pure), the documents (`corpus`, `span_files`), the
estimators that run models (`estimator`, `keytokens`) and the dataset the `longppl_govreport` task reads (`dataset`)."""

LAYER = "pure"  # harness/devtools/layers.py
