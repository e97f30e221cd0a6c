"""The pages of wp-rewrite's lint rules, one ``CODE.md`` per code: installed as the package data
``warp_rewrite.rules`` so that each ``--check --output-format json`` finding's ``url`` opens its page. A page links
only to the other pages of this folder, which are installed with it (tests/docs/test_wheel.py)."""
