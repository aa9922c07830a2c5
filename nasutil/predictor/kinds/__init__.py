"""The built-in predictor kinds, one module each, registered on first use as entry points of nasutil
(`nasutil.predictors` in pyproject.toml), as a plugin's kinds are."""
