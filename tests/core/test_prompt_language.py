"""The user's language in the Writer prompt (issue 13, acceptance "The user's language").

- An English card with ``language=en`` gives a Writer prompt, and a whole ``rp prompt`` output,
  without a single CJK character.
- A Chinese card with ``language=zh`` gives today's prompt. ``golden/writer_prompt_zh_v1.txt`` is
  the Writer system and prompt generated at the commit before the language setting existed
  (4caca98); it differs only by the two intended changes of the seeds' version 2, listed in
  ``INTENDED``: the format field no longer demands 简体中文, and the default persona is called
  用户 instead of 主角.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from roleplay.assets.seeds import ensure_seeds
from roleplay.assets.service import AssetService
from roleplay.cli import cli
from roleplay.cli_context import CliState
from roleplay.core.run import prepare_run
from roleplay.core.session_create import StoryRequest, create_story
from roleplay.features import build_runtime
from roleplay.harness.models.routes import Route
from roleplay.harness.store import EventStore
from roleplay.samples import SAMPLE_CARD, sample_card_bytes

pytestmark = pytest.mark.anyio

GOLDEN = Path(__file__).parent / "golden" / "writer_prompt_zh_v1.txt"
CJK = re.compile(r"[\u2e80-\u9fff\u3000-\u303f\uf900-\ufaff\uff00-\uffef]")
INTENDED = [
    (
        "- 使用简体中文与全角标点，对白使用中文引号“”。",
        "- 使用故事（角色卡与对话）所用的语言书写；写中文时使用全角标点，对白使用中文引号“”。",
    ),
    ("。主角是刚到镇上的外乡人", "。用户是刚到镇上的外乡人"),  # {{user}} in the card's scenario
    ("\n主角: 你一个人守这座灯塔？", "\n用户: 你一个人守这座灯塔？"),  # {{user}} in the example messages
    ("\nName: 主角\n", "\nName: 用户\n"),  # the persona's own name
]
ENGLISH_CARD = {
    "spec": "chara_card_v2",
    "spec_version": "2.0",
    "data": {
        "name": "Mara",
        "description": "{{char}} is a lighthouse keeper on a rock off a foggy harbour; {{user}} has just knocked on her door.",
        "personality": "Terse, watchful, honest once she trusts someone.",
        "scenario": "Dusk. Fog rolls in from the sea.",
        "first_mes": 'The iron door opens a crack. "We don\'t take visitors after dark," {{char}} says.',
        "mes_example": '<START>\n{{user}}: You keep this light alone?\n{{char}}: "Three generations have."',
        "creator_notes": "",
        "system_prompt": "",
        "post_history_instructions": "",
        "alternate_greetings": [],
        "tags": [],
        "creator": "",
        "character_version": "",
        "extensions": {},
    },
}


async def writer_view(store: EventStore, card: bytes, filename: str, text: str, language: str) -> str:
    rt = build_runtime(store)  # every built-in feature, as `rp` runs
    await ensure_seeds(rt.assets, language=language)  # type: ignore[arg-type]
    card_id = (await AssetService(store).import_file(card, filename)).asset_id
    record, _ = await create_story(rt, StoryRequest(card=card_id))
    p = await prepare_run(rt, record.id, text, parent_route=Route("demo", "demo"))
    return p.writer_system + "\n\n===== WRITER PROMPT =====\n" + p.build.writer_prompt


async def test_a_chinese_card_in_chinese_is_todays_prompt_but_for_the_intended_changes(store: EventStore) -> None:
    expected = GOLDEN.read_text(encoding="utf-8")
    for old, new in INTENDED:
        assert expected.count(old) == 1, old
        expected = expected.replace(old, new)
    got = await writer_view(store, sample_card_bytes(), SAMPLE_CARD, "我敲了敲铁门。", "zh")
    assert got == expected


async def test_an_english_card_in_english_has_no_cjk_in_the_writer_prompt(store: EventStore) -> None:
    got = await writer_view(store, json.dumps(ENGLISH_CARD).encode(), "mara.json", "I knock again.", "en")
    assert "Name: User" in got and "User: You keep this light alone?" in got
    assert CJK.findall(got) == []


def test_rp_prompt_for_an_english_card_is_english_only(tmp_path: Path) -> None:
    env = {"DEEPSEEK_API_KEY": "", "OPENAI_API_KEY": "", "OPENAI_BASE_URL": "", "RP_MODEL": "", "RP_DATABASE_URL": ""}

    def rp(*args: str):  # type: ignore[no-untyped-def]
        result = CliRunner().invoke(cli, ["--home", str(tmp_path), *args], env=env, obj=CliState())
        assert result.exit_code == 0, result.output
        return result

    card = tmp_path / "mara.json"
    card.write_text(json.dumps(ENGLISH_CARD), encoding="utf-8")
    rp("settings", "set", "language", "en")
    card_id = json.loads(rp("import", str(card), "--json").stdout)[0]["assetId"]
    sid = json.loads(rp("new", "--card", card_id, "--model", "demo", "--json").stdout)["sessionId"]
    shown = rp("prompt", sid, "--text", "I knock again.").stdout
    assert "===== WRITER PROMPT =====" in shown and "===== PARENT SYSTEM =====" in shown
    assert CJK.findall(shown) == []
