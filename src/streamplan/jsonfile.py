"""Reading JSON files with errors that name the file and say what went wrong."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from streamplan.errors import FileFormatError


def read_json(path: str | Path) -> Any:
    """Parse ``path`` as JSON; an unreadable or malformed file raises ``FileFormatError``."""
    p = Path(path)
    try:
        return json.loads(p.read_text())
    except OSError as e:
        raise FileFormatError(f"cannot read file: {e.strerror}", where=str(p)) from None
    except UnicodeDecodeError:
        raise FileFormatError("file is not UTF-8 text", where=str(p)) from None
    except json.JSONDecodeError as e:
        raise FileFormatError(f"not valid JSON: {e}", where=str(p)) from None
