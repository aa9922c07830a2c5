"""nasutil's built-in search spaces, installed as `nasutil_search_spaces`.

Each module registers one space through the `nasutil.search_spaces` entry-point
group in pyproject.toml, the same way a third-party plugin does.
"""
