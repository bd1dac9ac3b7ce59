"""Secrets become [REDACTED:<kind>]; ordinary text is untouched; JSON stays JSON."""

from __future__ import annotations

import json

import pytest

from tiermem.redact import KEEP, REDACT, redact, redact_counted, redact_data, redact_id, redact_tree

PEM = """-----BEGIN RSA PRIVATE KEY-----
MIIEowIBAAKCAQEA0Z3VS5JJcds3xfn/ygWyF8PbnGy0AHB7MhgHcTz6sE2I2yPB
aFDrBz9vFqU4yQ9kGhxxUhM2Z7rZ6y1MF0aLdTqf2z+5pc0F1Kx0ZuSxXOB6n1vY
-----END RSA PRIVATE KEY-----"""
BODY = [  # base64 lines of a private key (64 characters, mixed case), and its short last line
    "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7VJTUt9Us8cKj",
    "MzEfYyjiWA4R4/M2bS1GB4t7NXp98C3SC6dVMvDuictGeurT8jNbvJZHtCSuYEvu",
    "NMoSfm76oqFvAp8Gy0iz5sxjZmSnXyCdPEovGhLa0VzMaQ8s+CLOyS56YyCFGeJZ",
    "Zm9vYmFy8w==",
]
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"


@pytest.mark.parametrize(
    ("secret", "kind"),
    [
        ("sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z", "openai_key"),
        ("sk-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4zAb3d", "openai_key"),
        ("sk-ant-api03-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z-AA", "anthropic_key"),
        ("AKIAIOSFODNN7EXAMPLE", "aws_access_key"),
        ("ghp_16C7e42F292c6912E7710c838347Ae178B4a", "github_token"),
        ("github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuv", "github_token"),
        ("xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx", "slack_token"),
        ("AIzaSyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q", "google_api_key"),
        ("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U", "jwt"),
        (PEM, "private_key"),
        ("\n".join(BODY), "private_key"),  # a key body without its armour
    ],
)
def test_known_secret_kinds(secret: str, kind: str) -> None:
    text = f"here it is: {secret} -- keep it safe"
    redacted, counts = redact_counted(text)
    assert redacted == f"here it is: [REDACTED:{kind}] -- keep it safe"
    assert counts[kind] == 1


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Authorization: Bearer abcDEF123456ghiJKL789", "Authorization: Bearer [REDACTED:bearer_token]"),
        ("password=hunter2&user=bob", "password=[REDACTED:password]&user=bob"),
        ('{"password": "correct horse battery"}', '{"password": "[REDACTED:password]"}'),
        ("DB_PASSWORD: s3cr3t!", "DB_PASSWORD: [REDACTED:password]"),
        ("PGPASSWORD=s3cr3t", "PGPASSWORD=[REDACTED:password]"),
        ("api_key = 'abc123def'", "api_key = '[REDACTED:secret]'"),
        ("postgres://app:Sup3rS3cret@db.internal:5432/prod",
         "postgres://app:[REDACTED:password]@db.internal:5432/prod"),
        ("token: 9f8e7d6c5b4a", "token: [REDACTED:token]"),
        ("api_token=Zx9y8w7v6u5t", "api_token=[REDACTED:token]"),
        ("SLACK_BOT_TOKEN=abc123xyz789", "SLACK_BOT_TOKEN=[REDACTED:token]"),
        ('{"x-session-token": "t0k3n-abcdefgh"}', '{"x-session-token": "[REDACTED:token]"}'),
        (f"AWS_SECRET_ACCESS_KEY={AWS_SECRET}", "AWS_SECRET_ACCESS_KEY=[REDACTED:aws_secret_key]"),
        (f"aws secret access key {AWS_SECRET}", "aws secret access key [REDACTED:aws_secret_key]"),
        (f'"SecretAccessKey": "{AWS_SECRET}"', '"SecretAccessKey": "[REDACTED:aws_secret_key]"'),
        (f"AKIAIOSFODNN7EXAMPLE,{AWS_SECRET}", "[REDACTED:aws_access_key],[REDACTED:aws_secret_key]"),
        ('{"api_key": "ab\\"c123"}', '{"api_key": "[REDACTED:secret]"}'),  # an escaped quote inside
    ],
)
def test_assignments_keep_their_name(text: str, expected: str) -> None:
    assert redact(text) == expected


def test_cut_off_private_key_is_redacted_up_to_the_prose() -> None:
    text = "my key:\n-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ\n" \
           "AAAAAAAAAAEAAAAzAAAAC3NzaC1lZDI1NTE5\nthat is all, thanks"
    assert redact(text) == "my key:\n[REDACTED:private_key]\nthat is all, thanks"


@pytest.mark.parametrize(
    "text",
    [
        # one record per line (Daily bullets): the body lines are not left behind the header
        "- -----BEGIN PRIVATE KEY-----\n- " + "\n- ".join(BODY) + "\n- -----END PRIVATE KEY-----",
        # continuation lines of a record, indented two spaces
        "- user: -----BEGIN PRIVATE KEY-----\n  " + "\n  ".join(BODY) + "\n  -----END PRIVATE KEY-----",
        # the tail of a key whose header is in another piece (a chunk of a long record)
        "  " + "\n  ".join(BODY[1:]) + "\n  -----END PRIVATE KEY-----\n- next",
        # the middle of a key: long base64 lines and nothing else
        "\n".join(BODY[:3]),
        # inside JSON: newlines are \\n escapes
        json.dumps({"key": "-----BEGIN PRIVATE KEY-----\n" + "\n".join(BODY) + "\n-----END PRIVATE KEY-----"}),
        json.dumps({"key": "-----BEGIN PRIVATE KEY-----\n" + "\n".join(BODY[:2])}),
    ],
)
def test_a_private_key_body_never_survives(text: str) -> None:
    redacted = redact(text)
    for line in BODY[:3]:
        assert line not in redacted and line[:20] not in redacted
    assert "[REDACTED:private_key]" in redacted
    assert redact(redacted) == redacted


def test_key_material_in_a_record_keeps_the_record_form() -> None:
    text = "- a\n- " + "\n- ".join(["-----BEGIN PRIVATE KEY-----", *BODY, "-----END PRIVATE KEY-----"]) + "\n- b"
    assert redact(text) == "- a\n- [REDACTED:private_key]\n- b"


@pytest.mark.parametrize(
    "text",
    ["I use scikit-learn and sk-learn-style-pipelines-for-everything",
     "The password policy changed last week.", "Bearer of bad news", "ask-me-anything-about-python-today",
     "AKIA is a prefix", "Email me at bob@example.com", "See https://example.com/a:b@c",
     "Each token: a word piece", "max_tokens=4000", "tokens: many", "The secret is safe",
     "git commit 3f786850e387550fdab836ed7e6dc881de23001b",
     "3f786850e387550fdab836ed7e6dc881de23001b3f786850e387550fdab836ed\n"
     "0f786850e387550fdab836ed7e6dc881de23001b3f786850e387550fdab836ed",  # hex digests are not keys
     "Asia is large; the aws region eu-west-1 is in Europe"],
)
def test_ordinary_text_is_unchanged(text: str) -> None:
    assert redact(text) == text


def test_redaction_is_idempotent() -> None:
    text = (f"key sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z password=x Bearer abcdefghijklmnop1234\n{PEM}\n"
            f'token: "abc12345678" {{"password": "p"}} AWS_SECRET_ACCESS_KEY={AWS_SECRET}')
    once = redact(text)
    assert redact(once) == once
    assert redact_counted(once)[1] == {}
    assert "sk-proj" not in once and "MIIE" not in once and "abcdefghijklmnop1234" not in once
    assert AWS_SECRET not in once and "abc12345678" not in once


def test_json_stays_json() -> None:
    arguments = json.dumps({"api_key": "sk-proj-Q1w2E3r4T5y6U7i8O9p0A1s2D3f4G5h6", "token": "abc12345678",
                            "password": 'he said "hi"', "n": 3})
    redacted = redact(arguments)
    assert json.loads(redacted) == {"api_key": "[REDACTED:openai_key]", "token": "[REDACTED:token]",
                                    "password": "[REDACTED:password]", "n": 3}


def test_redact_data_walks_every_string_and_keeps_keys() -> None:
    message = {"role": "assistant", "content": [{"type": "text", "text": "key sk-proj-Q1w2E3r4T5y6U7i8O9p0A1s2"}],
               "tool_calls": [{"id": "call_1", "function": {"name": "login",
                                                            "arguments": '{"password": "hunter2"}'}}],
               "n": 1, "ok": True, "none": None}
    out = redact_data(message)
    assert out["content"][0]["text"] == "key [REDACTED:openai_key]"
    assert json.loads(out["tool_calls"][0]["function"]["arguments"]) == {"password": "[REDACTED:password]"}
    assert out["role"] == "assistant" and out["n"] == 1 and out["ok"] is True and out["none"] is None
    assert message["tool_calls"][0]["function"]["arguments"] == '{"password": "hunter2"}'  # not changed in place


def test_redacted_ids_stay_apart_and_compose() -> None:
    one, two = "thread-sk-proj-Q1w2E3r4T5y6U7i8O9p0A1s2", "thread-sk-proj-Z9x8C7v6B5n4M3l2K1j0H9g8"
    assert redact_id(one) != redact_id(two)
    assert redact_id(one) == redact_id(one) and redact_id(redact_id(one)) == redact_id(one)
    assert "Q1w2E3r4" not in redact_id(one) and redact_id(one).startswith("thread-[REDACTED:openai_key~")
    assert redact_id(f"conv:u:a:{one}") == f"conv:u:a:{redact_id(one)}"  # a namespace holds the id as it is
    assert redact_id("plain-thread-7") == "plain-thread-7"
    long_id = "x" * 240 + " pwd=abc"
    assert len(redact_id(long_id)) <= 256 and "abc" not in redact_id(long_id)


def test_a_redactor_that_is_off_changes_nothing() -> None:
    text = "password=hunter2"
    assert KEEP.text(text) == text and KEEP.ident(text) == text and KEEP.data({"a": text}) == {"a": text}
    assert KEEP.scrub is None and REDACT.scrub is redact
    assert REDACT.optional(None) is None and REDACT.text(text) == "password=[REDACTED:password]"


def test_a_tree_is_redacted_whole_and_json_inside_strings_too() -> None:
    inner = json.dumps({"password": "Tr0ub4dor-and-3x"})
    message = {"role": "assistant", "tool_calls": ({"function": {"name": "set", "arguments": json.dumps(
        {"api_key": "hunter2-quokka-771", "config": inner})}},), "input": {"client_secret": "plainwords"}}
    out = redact_tree(message)
    args = json.loads(out["tool_calls"][0]["function"]["arguments"])
    assert args["api_key"] == "[REDACTED:secret]" and json.loads(args["config"]) == {"password": "[REDACTED:password]"}
    assert out["input"] == {"client_secret": "[REDACTED:secret]"} and out["role"] == "assistant"
    assert redact_tree(out) == out  # idempotent
    for kept in ('{"b": 1,  "a": "x"}', "{not json", "[1, 2", '{"name": "api_key"}'):
        assert redact_tree(kept) == kept  # nothing to redact: the exact text
    assert REDACT.tree("{broken password=hunter2") == "{broken password=[REDACTED:password]"
    assert KEEP.tree(message) is message
