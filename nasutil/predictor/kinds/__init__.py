"""The built-in predictor kinds, one module each; every module here is registered on first use."""
