"""LiteLLM, imported once and only when a LiteLLM judge is first used: its import takes 3-4 s,
and `--help`, `validate` and the offline check never need it."""

from __future__ import annotations

import os
import warnings
from functools import cache
from typing import Any


@cache
def litellm() -> Any:
    """The `litellm` module, with its local price map (no download; a user's own
    `LITELLM_LOCAL_MODEL_COST_MAP` is left alone) and its debug banners off. Its cost code reads
    pydantic attributes deprecated since pydantic 2.11: those warnings, raised from LiteLLM's own
    modules, never reach the user's terminal."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    warnings.filterwarnings("ignore", category=DeprecationWarning, module=r"litellm(\.|$)")
    # pydantic's words for one item, and (since typing_extensions 4.16 marks several) for several
    warnings.filterwarnings("ignore", message=r"Items? '.*' on TypedDict class '.*' (is|are) using the `ReadOnly`")
    import litellm as module

    module.suppress_debug_info = True
    return module
