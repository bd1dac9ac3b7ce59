"""Secrets become [REDACTED:<kind>]; ordinary text is untouched."""

from __future__ import annotations

import pytest

from tiermem.redact import redact, redact_counted

PEM = """-----BEGIN RSA PRIVATE KEY-----
MIIEowIBAAKCAQEA0Z3VS5JJcds3xfn/ygWyF8PbnGy0AHB7MhgHcTz6sE2I2yPB
aFDrBz9vFqU4yQ9kGhxxUhM2Z7rZ6y1MF0aLdTqf2z+5pc0F1Kx0ZuSxXOB6n1vY
-----END RSA PRIVATE KEY-----"""


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
        ('{"password": "correct horse battery"}', '{"password": [REDACTED:password]}'),
        ("DB_PASSWORD: s3cr3t!", "DB_PASSWORD: [REDACTED:password]"),
        ("api_key = 'abc123def'", "api_key = [REDACTED:secret]"),
        ("postgres://app:Sup3rS3cret@db.internal:5432/prod",
         "postgres://app:[REDACTED:password]@db.internal:5432/prod"),
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
    ["I use scikit-learn and sk-learn-style-pipelines-for-everything",
     "The password policy changed last week.", "Bearer of bad news", "ask-me-anything-about-python-today",
     "AKIA is a prefix", "Email me at bob@example.com", "See https://example.com/a:b@c"],
)
def test_ordinary_text_is_unchanged(text: str) -> None:
    assert redact(text) == text


def test_redaction_is_idempotent() -> None:
    text = f"key sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z password=x Bearer abcdefghijklmnop1234\n{PEM}"
    once = redact(text)
    assert redact(once) == once
    assert "sk-proj" not in once and "MIIE" not in once and "abcdefghijklmnop1234" not in once
