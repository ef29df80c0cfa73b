"""Authenticated writes through the `azure-storage-blob` SDK (docs/contracts.md §11.4):
connection string, SAS token, account key or `azure-identity` credentials.
"""
from __future__ import annotations

import argparse
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Dict, Mapping, Optional

from spmi.base import usage
from spmi.base.errors import SuiteError

if TYPE_CHECKING:  # imported where used: commands that never touch storage start faster
    pass
from spmi.base.redaction import redact, register_secret
from spmi.storage.blobs import (
    CONNECTION_STRING_ENV,
    AccessDenied,
    StorageError,
    _describe_exception,
    account_name_from_url,
    blob_url,
    connection_string_endpoint,
    default_retry_policy,
    parse_connection_string,
    resolve_account_url,
)
from spmi.storage.downloads import _file_md5

log = logging.getLogger("superpmi")
SAS_TOKEN_ENV = "AZURE_STORAGE_SAS_TOKEN"
ACCOUNT_KEY_ENV = "AZURE_STORAGE_KEY"
AUTH_HELP = (f"set {CONNECTION_STRING_ENV}, {SAS_TOKEN_ENV} or {ACCOUNT_KEY_ENV} (or pass -connection_string, "
             "-sas_token or -account_key), or use --use_azure_cli / --use_default_credential after signing in")
VISIBLE_NOTE = "; the flag is visible to other local users in the process list, prefer $"


@dataclass
class StorageCredentials:
    """How to authenticate writes. Secrets are registered for redaction on creation."""

    connection_string: Optional[str] = None
    sas_token: Optional[str] = None
    account_key: Optional[str] = None
    use_azure_cli: bool = False
    use_default_credential: bool = False

    def __post_init__(self) -> None:
        if self.sas_token:
            self.sas_token = self.sas_token.lstrip("?")
        for secret in (self.connection_string, self.sas_token, self.account_key):
            register_secret(secret)
        if self.connection_string:
            fields = parse_connection_string(self.connection_string)
            register_secret(fields.get("accountkey"))
            register_secret(fields.get("sharedaccesssignature"))

    @classmethod
    def from_args(cls, args: argparse.Namespace,
                  environ: Optional[Mapping[str, str]] = None) -> "StorageCredentials":
        """Flags first; without any credential flag, the first of $AZURE_STORAGE_CONNECTION_STRING,
        $AZURE_STORAGE_SAS_TOKEN, $AZURE_STORAGE_KEY that is set (environment variables do not
        show in the process list, flags do)."""
        environ = os.environ if environ is None else environ
        explicit = any((args.connection_string, args.sas_token, args.account_key, args.use_azure_cli,
                        args.use_default_credential))
        from_env = {} if explicit else first_credential_from_environment(environ)
        return cls(connection_string=args.connection_string or from_env.get("connection_string"),
                   sas_token=args.sas_token or from_env.get("sas_token"),
                   account_key=args.account_key or from_env.get("account_key"),
                   use_azure_cli=bool(args.use_azure_cli), use_default_credential=bool(args.use_default_credential))

    def kind(self) -> Optional[str]:
        """What kind of credential this is, in words (never the secret)."""
        if self.connection_string:
            return "connection string"
        if self.sas_token:
            return "SAS token"
        if self.account_key:
            return "account key"
        if self.use_azure_cli:
            return "Azure CLI credential"
        if self.use_default_credential:
            return "default Azure credential"
        return None


def first_credential_from_environment(environ: Mapping[str, str]) -> dict:
    """The first credential set in the environment, as a `StorageCredentials` field."""
    for field_name, variable in (("connection_string", CONNECTION_STRING_ENV), ("sas_token", SAS_TOKEN_ENV),
                                 ("account_key", ACCOUNT_KEY_ENV)):
        value = (environ.get(variable) or "").strip()
        if value:
            return {field_name: value}
    return {}


def add_credential_options(parser: argparse.ArgumentParser) -> None:
    """Options for commands that write to storage."""
    group = parser.add_argument_group(
        "storage credentials (for writing)",
        f"Prefer the environment variables ${CONNECTION_STRING_ENV}, ${SAS_TOKEN_ENV} or ${ACCOUNT_KEY_ENV} "
        "(used in that order when no credential flag is given): a secret passed as a flag is visible to "
        "other local users in the process list.")
    group.add_argument("-connection_string", metavar="TEXT",
                       help=f"storage connection string{VISIBLE_NOTE}{CONNECTION_STRING_ENV}")
    group.add_argument("-sas_token", metavar="TOKEN",
                       help=f"SAS token with write permission{VISIBLE_NOTE}{SAS_TOKEN_ENV}")
    group.add_argument("-account_key", metavar="KEY", help=f"storage account key{VISIBLE_NOTE}{ACCOUNT_KEY_ENV}")
    usage.add_renamed(group, "-az_storage_key", "-account_key")
    group.add_argument("--use_azure_cli", action="store_true", help="authenticate as the signed-in Azure CLI user")
    group.add_argument("--use_default_credential", action="store_true",
                       help="authenticate with azure-identity's DefaultAzureCredential")


def _token_credential(credentials: StorageCredentials):  # type: ignore[no-untyped-def]
    flag = "--use_azure_cli" if credentials.use_azure_cli else "--use_default_credential"
    try:
        import azure.identity as identity
    except ImportError:
        raise SuiteError(f"{flag} needs the azure-identity package; run: pip install azure-identity") from None
    if credentials.use_azure_cli:
        return identity.AzureCliCredential()
    return identity.DefaultAzureCredential()


class StorageWriter:
    """Authenticated access through the `azure-storage-blob` SDK."""

    def __init__(self, credentials: StorageCredentials, account_url: Optional[str] = None) -> None:
        if credentials.kind() is None:
            raise SuiteError(f"writing to storage needs a credential; {AUTH_HELP}")
        self.credentials = credentials
        self.client = self._make_client(credentials, account_url)
        self.account_url = self.client.url.rstrip("/")

    @staticmethod
    def _make_client(credentials: StorageCredentials, account_url: Optional[str]):  # type: ignore[no-untyped-def]
        from azure.storage.blob import BlobServiceClient, ExponentialRetry
        retries = default_retry_policy().attempts - 1
        options: Dict[str, Any] = {"retry_policy": ExponentialRetry(initial_backoff=1, increment_base=2, retry_total=retries,
                                                    random_jitter_range=1),
                   "connection_timeout": 15, "read_timeout": 120}
        try:
            if credentials.connection_string:
                if not connection_string_endpoint(credentials.connection_string):
                    raise ValueError("no BlobEndpoint or AccountName")
                client = BlobServiceClient.from_connection_string(credentials.connection_string, **options)
                if account_url and account_url.rstrip("/") != client.url.rstrip("/"):
                    log.warning("Warning: using the connection string's endpoint %s, not %s",
                                client.url.rstrip("/"), account_url)
                return client
            url = account_url or resolve_account_url(None)
            if credentials.sas_token:
                from azure.core.credentials import AzureSasCredential
                return BlobServiceClient(url, credential=AzureSasCredential(credentials.sas_token), **options)
            if credentials.account_key:
                from azure.core.credentials import AzureNamedKeyCredential
                key = AzureNamedKeyCredential(account_name_from_url(url), credentials.account_key)
                return BlobServiceClient(url, credential=key, **options)
            return BlobServiceClient(url, credential=_token_credential(credentials), **options)
        except SuiteError:
            raise
        except (ValueError, TypeError) as exc:
            raise SuiteError(f"the {credentials.kind()} is not usable ({redact(str(exc))}); {AUTH_HELP}") from None

    def _call(self, action: str, operation: Callable[[], Any]) -> Any:
        """Run one SDK operation, turning its errors into one secret-free line."""
        from azure.core.exceptions import (
            ClientAuthenticationError,
            HttpResponseError,
            ServiceRequestError,
            ServiceResponseError,
        )
        try:
            return operation()
        except ClientAuthenticationError as exc:
            raise AccessDenied(f"{action}: authentication to {self.account_url} with the {self.credentials.kind()} "
                               f"failed ({_sdk_reason(exc)}); {AUTH_HELP}") from None
        except HttpResponseError as exc:
            status = getattr(exc, "status_code", None)
            if status in (401, 403):
                raise AccessDenied(f"{action}: {self.account_url} refused the {self.credentials.kind()} "
                                   f"(HTTP {status} {_sdk_reason(exc)}); {AUTH_HELP}") from None
            raise StorageError(f"{action} failed: HTTP {status} {_sdk_reason(exc)}") from None
        except (ServiceRequestError, ServiceResponseError) as exc:
            raise StorageError(f"{action}: cannot reach {self.account_url} ({_describe_exception(exc)}); "
                               "check the network and -storage_url") from None

    def create_container(self, container: str, public: bool = True) -> None:
        """Create a container (public-read when `public`); an existing one is fine."""
        from azure.core.exceptions import ResourceExistsError

        def create() -> None:
            try:
                self.client.create_container(container, public_access="container" if public else None)
            except ResourceExistsError:
                pass
        self._call(f"Creating container {container}", create)

    def blob_exists(self, container: str, name: str) -> bool:
        blob = self.client.get_blob_client(container, name)
        return bool(self._call(f"Checking {container}/{name}", blob.exists))

    def upload_file(self, container: str, name: str, path: Path) -> str:
        """Upload `path` as `<container>/<name>` (replacing an existing blob, with a warning)."""
        from azure.storage.blob import ContentSettings
        blob = self.client.get_blob_client(container, name)
        url = blob_url(container, name, self.account_url)
        if self._call(f"Checking {url}", blob.exists):
            log.warning("Warning: replacing existing blob!")
        md5 = _file_md5(path)
        log.info("Uploading %s -> %s", path, url)

        def upload() -> None:
            with path.open("rb") as handle:
                blob.upload_blob(handle, overwrite=True, max_concurrency=4, length=path.stat().st_size,
                                 content_settings=ContentSettings(content_md5=bytearray(md5)))
        self._call(f"Uploading {path.name}", upload)
        return url


def _sdk_reason(exc: Exception) -> str:
    code = getattr(exc, "error_code", None)
    reason = getattr(exc, "reason", None)
    text = " ".join(str(p) for p in (reason, code) if p)
    if not text:
        text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return redact(text[:200])


def upload_file(container: str, name: str, path: Path, credentials: StorageCredentials,
                account_url: Optional[str] = None) -> str:
    return StorageWriter(credentials, account_url).upload_file(container, name, path)
