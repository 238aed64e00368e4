"""The one error type the CLI turns into a single line and a non-zero exit."""


class FusekitError(Exception):
    """A failure the user can act on; its message is shown as one line (plus optional detail)."""

    def __init__(self, message: str, detail: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.detail = detail
