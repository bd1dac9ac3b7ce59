"""The file-backed tiers: Context sessions, the Daily journal and ``MEMORY.md``, and their index."""

from tiermem.tiers.context import Session, SessionStore, inject_summary
from tiermem.tiers.conversation import ConversationJournal, NumberedMessage, conversation_digest
from tiermem.tiers.core import CoreFile, CoreSection, parse_core, render_core
from tiermem.tiers.daily import DailyJournal
from tiermem.tiers.flush import FlushBatch, message_digest, prepare_flush, strip_scheduled
from tiermem.tiers.markdown import Record, parse_records, render_record
from tiermem.tiers.turns import ChatMessage, to_message, turn_spans

__all__ = [
    "ChatMessage",
    "ConversationJournal",
    "CoreFile",
    "CoreSection",
    "DailyJournal",
    "FlushBatch",
    "NumberedMessage",
    "Record",
    "Session",
    "SessionStore",
    "conversation_digest",
    "inject_summary",
    "message_digest",
    "parse_core",
    "parse_records",
    "prepare_flush",
    "render_core",
    "render_record",
    "strip_scheduled",
    "to_message",
    "turn_spans",
]
