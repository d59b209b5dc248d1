"""``rp quick-replies list|add|edit|delete``: the global quick replies from the terminal.

Every change takes ``--expected-revision`` (the revision ``list`` shows) so a script never
overwrites a change it has not seen. Where the cursor lands after inserting one is the
``quickReplies.cursor`` setting (``rp settings set quickReplies.cursor start``). In ``rp play``,
``/qr LABEL`` puts one into the draft; ``/send`` sends the draft.
"""

from __future__ import annotations

import json

import click

from roleplay.cli_context import echo_json, home_option, json_option, run, state_of, terminal_safe

from . import QuickReplies, QuickReplyList

expected_option = click.option(
    "--expected-revision",
    type=click.IntRange(min=0),
    help="Refuse the change unless the quick replies are still at this revision (`list` shows it).",
)


def _show(listed: QuickReplyList, as_json: bool, what: str | None = None) -> None:
    if as_json:
        echo_json(listed.to_dict())
        return
    if what is not None:
        click.echo(terminal_safe(what, one_line=True), err=True)
    for item in listed.items:
        click.echo(terminal_safe(f"{item['label']}  {json.dumps(item['text'], ensure_ascii=False)}", one_line=True))
    click.echo(f"({len(listed.items)} quick replies, revision {listed.revision}, cursor {listed.cursor})", err=True)


@click.group("quick-replies")
def quick_replies() -> None:
    """List, add, edit and delete quick replies (snippets /qr inserts into your draft in rp play)."""


@quick_replies.command("list")
@home_option
@json_option
@click.pass_context
@run
async def list_command(ctx: click.Context, as_json: bool) -> None:
    """Show every quick reply, its label and text."""
    async with state_of(ctx).open_store() as store:
        listed = await QuickReplies(store).list()
    _show(listed, as_json)


@quick_replies.command("add")
@home_option
@click.argument("label")
@click.argument("text")
@expected_option
@json_option
@click.pass_context
@run
async def add_command(ctx: click.Context, label: str, text: str, expected_revision: int | None, as_json: bool) -> None:
    """Add a quick reply LABEL with TEXT (labels are unique)."""
    async with state_of(ctx).open_store() as store:
        listed = await QuickReplies(store).add(label, text, expected_revision=expected_revision)
    _show(listed, as_json, f"added {label.strip()}")


@quick_replies.command("edit")
@home_option
@click.argument("label")
@click.option("--label", "new_label", help="The new label.")
@click.option("--text", help="The new text.")
@expected_option
@json_option
@click.pass_context
@run
async def edit_command(
    ctx: click.Context, label: str, new_label: str | None, text: str | None, expected_revision: int | None, as_json: bool
) -> None:
    """Change the label or the text of the quick reply LABEL."""
    async with state_of(ctx).open_store() as store:
        listed = await QuickReplies(store).edit(label, new_label=new_label, text=text, expected_revision=expected_revision)
    _show(listed, as_json, f"edited {label.strip()}")


@quick_replies.command("delete")
@home_option
@click.argument("label")
@expected_option
@json_option
@click.pass_context
@run
async def delete_command(ctx: click.Context, label: str, expected_revision: int | None, as_json: bool) -> None:
    """Delete the quick reply LABEL."""
    async with state_of(ctx).open_store() as store:
        listed = await QuickReplies(store).delete(label, expected_revision=expected_revision)
    _show(listed, as_json, f"deleted {label.strip()}")
