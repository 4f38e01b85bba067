"""The ACL account of the Spark data source: options or environment, and refusals that say what to fix.

Owns ``Credentials``: the ``accessKey`` / ``secretKey`` options as given (a frozen value that travels
in Spark's pickles; the secret is never in its ``repr``), resolved where they are used, in the
driver's planner and in every worker, with ``ROCKETPY_ACCESS_KEY`` / ``ROCKETPY_SECRET_KEY`` of that
process filling what the options leave out. So a secret given only in the environment is never in
Spark's plan, its options or its pickles. ``refused`` turns a broker's ACL refusal (NO_PERMISSION
``access denied: ...``) into an error naming the options; no message here ever holds the secret.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from rocketpy.acl.signing import RequestSigner
from rocketpy.errors import AccessDeniedError
from rocketpy.spark.errors import SparkOptionError

ACCESS_KEY_ENV = "ROCKETPY_ACCESS_KEY"
SECRET_KEY_ENV = "ROCKETPY_SECRET_KEY"


class SparkAccessError(SparkOptionError):
    """The brokers refused the read's or write's ACL account (or its absence): not retriable."""

    retriable = False


@dataclass(frozen=True)
class Credentials:
    """An ACL account as the options give it (either part may come from the environment instead).

    Attributes:
        access_key: option ``accessKey`` (None: ``ROCKETPY_ACCESS_KEY`` where it is used).
        secret_key: option ``secretKey`` (None: ``ROCKETPY_SECRET_KEY``); never in ``repr``.
    """

    access_key: str | None = None
    secret_key: str | None = field(default=None, repr=False)

    def resolved(self) -> Credentials:
        """Options first, then this process's environment; both parts or neither.

        Raises:
            SparkOptionError: only one part is known (names the option and the variable to set).
        """
        access = self.access_key or os.environ.get(ACCESS_KEY_ENV) or None
        secret = self.secret_key or os.environ.get(SECRET_KEY_ENV) or None
        if (access is None) != (secret is None):
            missing = "secretKey" if secret is None else "accessKey"
            env = SECRET_KEY_ENV if secret is None else ACCESS_KEY_ENV
            raise SparkOptionError(
                f"option {missing} is missing: an ACL account needs accessKey and secretKey (options, or"
                f" {ACCESS_KEY_ENV} / {SECRET_KEY_ENV} in the environment of Spark's driver and workers;"
                f" {env} is not set here)"
            )
        return Credentials(access, secret)

    def signer(self) -> RequestSigner | None:
        """The request signer of the resolved account (None: requests go unsigned)."""
        creds = self.resolved()
        if creds.access_key is None or creds.secret_key is None:
            return None
        return RequestSigner(creds.access_key, creds.secret_key)

    def sdk_kwargs(self) -> dict[str, Any]:
        """``access_key=`` / ``secret_key=`` for the SDK's producers (empty: unsigned)."""
        creds = self.resolved()
        if creds.access_key is None:
            return {}
        return {"access_key": creds.access_key, "secret_key": creds.secret_key}


def refused(error: AccessDeniedError, creds: Credentials) -> SparkAccessError:
    """The error to raise for a broker's ACL refusal: its remark, and which options to fix."""
    account = creds.resolved().access_key
    if account is None:
        hint = (
            "the cluster has ACL on: give the options accessKey and secretKey (or set "
            f"{ACCESS_KEY_ENV} / {SECRET_KEY_ENV} for Spark's driver and workers)"
        )
    else:
        hint = (
            f"check the options accessKey ({account!r}) and secretKey, or that account's permissions "
            "in the brokers' plain_acl.yml"
        )
    return SparkAccessError(f"{error.remark or error} ({hint})")
