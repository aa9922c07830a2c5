"""Hydra configs of `nasutil-search` (installed as the `nasutil_conf` package so that an installed
nasutil finds them through Hydra's `pkg://` search path)."""
