"""MLflow tracking; the only package that imports mlflow (besides the pyfunc model file it logs).

- ``store``: the store in use (``MLFLOW_TRACKING_URI``, else ``./mlflow.db``), whether it answers,
  its artifact folders;
- ``tags``: the tags segrl's runs carry (segmenter, kind, data, version, MLflow's source tags,
  ``$SEGRL_RUN_TAGS``);
- ``runs``: starting, resuming and ending runs; logging params, metrics, artifacts, segmenters and
  the data they trained on;
- ``models``: a saved segmenter as a run's MLflow model (the file ``segrl/pyfunc_model.py``);
- ``queries``: reading runs back: segmenter runs for ``segrl compare``, metric histories;
- ``ui``: the MLflow UI's view of segrl's runs, the link to it, and the server ``segrl ui`` starts.
"""
