"""The pages of wp-rewrite's lint rules, one ``CODE.md`` per code: installed as the package data
``warp_rewrite.rules`` so that each ``--check --output-format json`` finding's ``url`` opens its page."""
