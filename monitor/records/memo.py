"""`Memo`: what is derived from a record once, carried with it (`RagRecord.memo`)."""


class Memo:
    """What is derived from a record once (its request fingerprint, `fingerprint.py`; its
    dimension values, `where.py`), each with what it was derived from. It travels with the
    record when pickled, so that what an evaluation worker derived the ingest process does
    not derive again, and it takes no part in the record's equality."""

    __slots__ = ("fingerprint", "where")

    def __init__(self) -> None:
        self.fingerprint: tuple[str | None, object, object] | None = None
        self.where: tuple[tuple[object, ...], object] | None = None

    def __eq__(self, other: object) -> bool:
        return True

    __hash__ = None  # type: ignore[assignment]
