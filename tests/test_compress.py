"""The rules of DCP-style compression (R50-R53) on small hand-built message lists, both shapes."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from tiermem.compress import CompressionResult, check_tool_pairs, compress, looks_failed
from tiermem.errors import InvalidInput

SUPERSEDED_READ = "[tiermem: output superseded by a later identical call to read_file]"
LONG = "\n".join(f"{n:>6}\tline {n} of the module with some code in it = value_{n}" for n in range(1, 40))
LONG_V2 = LONG.replace("value_7", "changed_7")


class Shape:
    """Builds tool exchanges in OpenAI or Anthropic shape."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name

    def exchange(
        self, cid: str, tool: str, args: dict[str, Any], output: str, error: bool = False
    ) -> list[dict[str, Any]]:
        if self.name == "anthropic":
            result: dict[str, Any] = {"type": "tool_result", "tool_use_id": cid, "content": output}
            if error:
                result["is_error"] = True
            return [
                {"role": "assistant", "content": [{"type": "tool_use", "id": cid, "name": tool, "input": args}]},
                {"role": "user", "content": [result]},
            ]
        text = f"Error: {output}" if error else output
        call = {"id": cid, "type": "function", "function": {"name": tool, "arguments": json.dumps(args)}}
        return [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": cid, "content": text},
        ]

    def result_text(self, messages: list[dict[str, Any]], cid: str) -> Any:
        for message in messages:
            if message.get("role") == "tool" and message.get("tool_call_id") == cid:
                return message["content"]
            if isinstance(message.get("content"), list):
                for block in message["content"]:
                    if block.get("type") == "tool_result" and block.get("tool_use_id") == cid:
                        return block["content"]
        raise AssertionError(f"no result for {cid}")

    def call_args(self, messages: list[dict[str, Any]], cid: str) -> Any:
        for message in messages:
            for call in message.get("tool_calls") or []:
                if call["id"] == cid:
                    return json.loads(call["function"]["arguments"])
            if isinstance(message.get("content"), list):
                for block in message["content"]:
                    if block.get("type") == "tool_use" and block.get("id") == cid:
                        return block["input"]
        raise AssertionError(f"no call {cid}")


SHAPES = [Shape("openai"), Shape("anthropic")]


def say(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": text}


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def reads_conversation(shape: Shape) -> list[dict[str, Any]]:
    return [
        {"role": "system", "content": "You are a coding agent."},
        user("Fix the bug in app.py"),
        *shape.exchange("c1", "read_file", {"path": "app.py"}, LONG),
        *shape.exchange("c2", "read_file", {"path": "util.py"}, LONG),
        say("Found it, editing."),
        user("Also check app.py again"),
        *shape.exchange("c3", "read_file", {"path": "app.py"}, LONG_V2),
        say("Looks right now."),
    ]


@pytest.mark.parametrize("shape", SHAPES, ids=repr)
def test_identical_calls_keep_only_the_latest_output(shape: Shape) -> None:
    messages = reads_conversation(shape)
    result = compress(messages, protect_turns=1)
    assert shape.result_text(result.messages, "c1") == SUPERSEDED_READ
    assert shape.result_text(result.messages, "c2") == LONG  # another file: untouched
    assert shape.result_text(result.messages, "c3") == LONG_V2  # the latest output stays
    assert [a.rule for a in result.actions] == ["superseded_output"]
    assert result.actions[0].tool_call_id == "c1" and result.actions[0].original == LONG
    assert result.tokens_saved == result.actions[0].tokens_saved > 300
    assert result.tokens_before - result.tokens_after == result.tokens_saved
    assert check_tool_pairs(result.messages) == []


@pytest.mark.parametrize("shape", SHAPES, ids=repr)
def test_latest_copy_in_an_unprotected_turn_also_supersedes(shape: Shape) -> None:
    messages = reads_conversation(shape) + [user("thanks"), say("You're welcome.")]
    result = compress(messages, protect_turns=1)
    assert shape.result_text(result.messages, "c1") == SUPERSEDED_READ
    assert shape.result_text(result.messages, "c3") == LONG_V2


def test_arguments_are_compared_as_canonical_json() -> None:
    shape = SHAPES[0]
    messages = [user("go"), *shape.exchange("a", "grep", {"pattern": "x", "path": "."}, LONG)]
    later = shape.exchange("b", "grep", {}, LONG_V2)
    later[0]["tool_calls"][0]["function"]["arguments"] = '{"path": ".",   "pattern": "x"}'
    other = shape.exchange("c", "grep", {"pattern": "y", "path": "."}, LONG)
    messages += [*later, *other, user("next"), say("ok")]
    result = compress(messages, protect_turns=1)
    assert shape.result_text(result.messages, "a").startswith("[tiermem: output superseded")
    assert shape.result_text(result.messages, "b") == LONG_V2
    assert shape.result_text(result.messages, "c") == LONG  # different arguments


def test_same_arguments_to_a_different_tool_are_not_identical() -> None:
    shape = SHAPES[1]
    messages = [
        user("go"),
        *shape.exchange("a", "read_file", {"path": "x.py"}, LONG),
        *shape.exchange("b", "view_file", {"path": "x.py"}, LONG),
        user("next"),
    ]
    result = compress(messages, protect_turns=1)
    assert result.actions == []
    assert result.messages == messages


def test_placeholder_only_where_it_saves_tokens() -> None:
    shape = SHAPES[0]
    messages = [
        user("go"),
        *shape.exchange("a", "run_command", {"command": "true"}, "ok"),
        *shape.exchange("b", "run_command", {"command": "true"}, "ok"),
        user("next"),
    ]
    result = compress(messages, protect_turns=1)
    assert result.actions == [] and result.tokens_saved == 0
    assert shape.result_text(result.messages, "a") == "ok"


def test_protected_tools_are_never_touched() -> None:
    shape = SHAPES[1]
    messages = reads_conversation(shape)
    result = compress(messages, protect_turns=1, protect_tools={"read_file"})
    assert result.actions == []
    assert compress(messages, protect_turns=1, protect_tools="read_file").actions == []
    assert shape.result_text(result.messages, "c1") == LONG


@pytest.mark.parametrize("shape", SHAPES, ids=repr)
def test_duplicate_messages_collapse_to_the_latest(shape: Shape) -> None:
    log = "CI log:\n" + LONG
    messages = [
        user("Fix CI"),
        say("Please paste the log."),
        user(log),
        *shape.exchange("a", "read_file", {"path": "ci.yml"}, "steps: [test]"),
        say("Fixed it."),
        user(log),
        say("That is the same log as before; it predates the fix."),
        user("ok"),
    ]
    result = compress(messages, protect_turns=1)
    assert result.messages[2] == {"role": "user", "content": "[tiermem: duplicate of a later user message]"}
    assert result.messages[6] == user(log)
    assert [m["role"] for m in result.messages] == [m["role"] for m in messages]  # alternation kept
    assert [a.rule for a in result.actions] == ["duplicate_message"]
    assert result.actions[0].index == 2 and result.actions[0].original == log
    assert check_tool_pairs(result.messages) == []


def test_duplicates_compare_content_lists_and_roles() -> None:
    parts = [{"type": "text", "text": LONG}]
    messages = [
        user("start"),
        {"role": "assistant", "content": copy.deepcopy(parts)},
        {"role": "user", "content": copy.deepcopy(parts)},  # same content, other role: not a duplicate
        {"role": "assistant", "content": copy.deepcopy(parts)},
        user("next"),
    ]
    result = compress(messages, protect_turns=1)
    assert result.messages[1]["content"] == "[tiermem: duplicate of a later assistant message]"
    assert result.messages[2]["content"] == parts
    assert result.messages[3]["content"] == parts


def test_system_and_first_user_message_are_kept_even_when_repeated() -> None:
    task = "Please refactor the parser.\n" + LONG
    messages = [
        {"role": "system", "content": "sys " + LONG},
        user(task),
        say("Sure."),
        {"role": "system", "content": "sys " + LONG},
        user(task),
        say("Done."),
    ]
    result = compress(messages, protect_turns=0)
    assert result.messages[0] == messages[0] and result.messages[1] == messages[1]
    assert result.messages[3] == messages[3]  # system messages are never touched
    assert result.messages[4] == messages[4]  # the latest copy of the duplicate


@pytest.mark.parametrize("shape", SHAPES, ids=repr)
def test_inputs_of_failed_calls_are_purged_after_n_turns(shape: Shape) -> None:
    big_edit = {"path": "app.py", "old_string": LONG, "new_string": LONG_V2}
    messages = [
        user("turn 0"),
        *shape.exchange("old", "edit_file", big_edit, "old_string not found in app.py", error=True),
        *shape.exchange("ok", "edit_file", dict(big_edit, path="lib.py"), "The file lib.py has been updated."),
        user("turn 1"),
        *shape.exchange("recent", "edit_file", dict(big_edit, path="x.py"), "old_string not found in x.py", error=True),
        user("turn 2"),
        say("..."),
        user("turn 3"),
    ]
    before_errors = {cid: shape.result_text(messages, cid) for cid in ("old", "recent")}
    # "old" has 3 newer turns, "recent" 2: with purge_errors_after=3 only "old" is purged
    result = compress(messages, protect_turns=0, purge_errors_after=3)
    assert shape.call_args(result.messages, "old") == {
        "_tiermem": "[tiermem: input of this failed call removed; its error is kept]"
    }
    assert shape.call_args(result.messages, "ok") == dict(big_edit, path="lib.py")  # succeeded: kept
    assert shape.call_args(result.messages, "recent") == dict(big_edit, path="x.py")
    for cid, text in before_errors.items():
        assert shape.result_text(result.messages, cid) == text  # error text stays
    assert [a.rule for a in result.actions] == ["purged_error_input"]
    assert result.actions[0].original and "old_string" in result.actions[0].original
    # one turn later the second failure is old enough too
    later = compress(messages + [say("..."), user("turn 4")], protect_turns=0, purge_errors_after=3)
    assert shape.call_args(later.messages, "recent") != dict(big_edit, path="x.py")
    assert check_tool_pairs(later.messages) == []


def test_openai_arguments_stay_a_json_string_after_purging() -> None:
    shape = SHAPES[0]
    messages = [
        user("go"),
        *shape.exchange("a", "write_file", {"path": "a.py", "content": LONG}, "permission denied", error=True),
        user("1"),
        user("2"),
    ]
    result = compress(messages, protect_turns=0, purge_errors_after=2)
    arguments = result.messages[1]["tool_calls"][0]["function"]["arguments"]
    assert isinstance(arguments, str) and "_tiermem" in json.loads(arguments)


def test_openai_explicit_is_error_flag_wins_over_the_heuristic() -> None:
    shape = SHAPES[0]
    messages = [user("go"), *shape.exchange("a", "write_file", {"path": "a.py", "content": LONG}, "done"), user("1")]
    messages[2]["is_error"] = True
    messages += [user("2")]
    result = compress(messages, protect_turns=0, purge_errors_after=2)
    assert [a.rule for a in result.actions] == ["purged_error_input"]


@pytest.mark.parametrize(
    "text",
    [
        "Error: file not found: x.py",
        "ERROR: could not install packages",
        "error[E0432]: unresolved import `foo`",
        "fatal: not a git repository (or any of the parent directories): .git",
        'Traceback (most recent call last):\n  File "x.py", line 1\nValueError: bad',
        "FileNotFoundError: [Errno 2] No such file or directory: 'x'",
        "FAILED tests/test_a.py::test_x\n1 failed in 0.2s\n\n[exit code: 1]",
        "src/a.ts(3,1): error TS2304\nProcess exited with code 2",
        "make: *** [all] Error 2\nexit status 2",
    ],
)
def test_openai_failure_heuristic_detects(text: str) -> None:
    assert looks_failed(text)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "errors.py\nmain.py\nerror_codes.md",
        "10 passed in 0.3s\n\n[exit code: 0]",
        "     1\tdef f():\n     2\t    raise ValueError('Error: x')\n     3\t    # exit code: 1 means failure",
        "The file app.py has been updated.",
        "Exit code explanation:\nThe exit code 1 is returned when...\nmore lines\nand the end",
    ],
)
def test_openai_failure_heuristic_is_conservative(text: str) -> None:
    assert not looks_failed(text)


@pytest.mark.parametrize("shape", SHAPES, ids=repr)
def test_input_is_never_mutated_and_output_shares_no_dicts(shape: Shape) -> None:
    messages = reads_conversation(shape) + [user("thanks"), say("bye")]
    snapshot = copy.deepcopy(messages)
    result = compress(messages, protect_turns=1)
    assert messages == snapshot
    assert result.messages is not messages and result.actions
    result.messages[-1]["content"] = "changed"
    result.messages[2]["extra"] = True
    assert messages == snapshot


def test_last_turns_are_untouched() -> None:
    shape = SHAPES[1]
    messages = reads_conversation(shape)
    result = compress(messages, protect_turns=2)  # both turns protected: nothing to do
    assert result.actions == [] and result.messages == messages
    assert json.dumps(result.messages) == json.dumps(messages)


def test_fewer_turns_than_protected_and_empty_lists() -> None:
    assert compress([]).messages == [] and compress([]).tokens_saved == 0
    only_system = [{"role": "system", "content": LONG}, {"role": "system", "content": LONG}]
    assert compress(only_system, protect_turns=0).actions == []


def test_result_type_and_saving_properties() -> None:
    result = compress(reads_conversation(SHAPES[0]), protect_turns=1)
    assert isinstance(result, CompressionResult)
    assert result.summary is None and result.summary_error is None  # no llm given
    assert result.tokens_after < result.tokens_before


@pytest.mark.parametrize(
    ("messages", "kwargs"),
    [
        ("not a list", {}),
        ([{"content": "no role"}], {}),
        (["just a string"], {}),
        ([], {"protect_turns": -1}),
        ([], {"protect_turns": True}),
        ([], {"purge_errors_after": 1.5}),
    ],
)
def test_bad_input_is_a_typed_error(messages: Any, kwargs: dict[str, Any]) -> None:
    with pytest.raises(InvalidInput):
        compress(messages, **kwargs)


def test_rules_can_be_switched_off() -> None:
    messages = reads_conversation(SHAPES[0])
    result = compress(messages, protect_turns=1, dedup_tool_outputs=False)
    assert result.actions == []
