"""Persona intake: PersonaLens users (directory or HTTP) and custom personas -> ``Persona`` rows.

Usage::

    result = load_personas(settings.persona_source, PersonaSelection(count=5))
    for error in result.errors:   # each names the file and the field
        print(error)
    personas = result.personas
"""

from __future__ import annotations

from memoryquest.intake.custom import (
    CustomPersona,
    CustomPersonaFile,
    CustomTask,
    load_custom_personas,
)
from memoryquest.intake.errors import IntakeError, IntakeResult, IntakeSourceError
from memoryquest.intake.load import check_selection, is_http_source, load_personas
from memoryquest.intake.normalise import canonical_affinity_name, natural_key, unsafe_user_id
from memoryquest.intake.personalens_mapping import map_personalens_user
from memoryquest.intake.selection import PersonaSelection

__all__ = [
    "CustomPersona",
    "CustomPersonaFile",
    "CustomTask",
    "IntakeError",
    "IntakeResult",
    "IntakeSourceError",
    "PersonaSelection",
    "canonical_affinity_name",
    "check_selection",
    "is_http_source",
    "load_custom_personas",
    "load_personas",
    "map_personalens_user",
    "natural_key",
    "unsafe_user_id",
]
