"""``tiermem doctor``: check a store (:func:`check`) and rebuild what can be rebuilt (:func:`repair`)."""

from tiermem.doctor.check import check
from tiermem.doctor.repair import repair
from tiermem.doctor.report import DoctorReport, RepairReport

__all__ = ["DoctorReport", "RepairReport", "check", "repair"]
