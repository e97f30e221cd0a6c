# SPDX-License-Identifier: Apache-2.0
# Copyright (c) 2026 the warp-rewrite authors
"""The contract between generated code and the runtime: the version and the ABI number."""

__version__ = "0.3.0"
