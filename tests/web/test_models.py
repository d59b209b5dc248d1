"""Request bodies: camelCase on the wire, unknown fields refused."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from roleplay.web.models import SessionCreate, SwipeBody, TurnAccepted


def test_bodies_read_camel_case_and_refuse_unknown_fields() -> None:
    body = SessionCreate.model_validate({"sample": True, "openingIndex": 1, "writingStyles": ["ast_1"]})
    assert body.opening_index == 1 and body.writing_styles == ["ast_1"]
    with pytest.raises(ValidationError):
        SessionCreate.model_validate({"sample": True, "titel": "typo"})
    assert SwipeBody.model_validate({"direction": 2}).direction == 2
    with pytest.raises(ValidationError):
        SwipeBody.model_validate({"direction": "up"})


def test_responses_dump_camel_case() -> None:
    out = TurnAccepted(session_id="ses_1", turn_id="turn_1", kind="turn", events="/e").model_dump(by_alias=True)
    assert out == {"sessionId": "ses_1", "turnId": "turn_1", "kind": "turn", "events": "/e"}
