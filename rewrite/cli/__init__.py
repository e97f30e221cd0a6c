"""The command line, ``wp-rewrite``: ``main`` (its options, output and file writes), the rewrite of source files
into emitted modules (``emit``), ``--check`` (``lint``), and what both read off source files they never import
(``source_file``, ``elision``, ``scopes``, ``static_module``, ``project``, ``static_frontend``). The rewrite itself
is the shared ``warp_rewrite.pipeline``; the API is ``warp_rewrite.api``."""
