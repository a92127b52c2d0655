"""Publishing a Hub dataset folder (``vhx push``): one upload of the folder as written, errors said in one line."""

from __future__ import annotations

from pathlib import Path

from huggingface_hub import HfApi

from vhx.errors import DataError, VHXError
from vhx.hub.card import card_for_repo


def push_folder(
    folder: str | Path,
    repo_id: str,
    *,
    private: bool | None = None,
    revision: str | None = None,
    commit_message: str | None = None,
    token: str | None = None,
) -> str:
    """Publish a Hub folder written by :func:`write_hub_folder` as dataset repo ``repo_id``.

    The token comes from ``token`` or, by default, huggingface_hub's usual sources (``HF_TOKEN``,
    ``hf auth login``); vhx never prints or stores it. Returns the commit URL.

    Raises:
        PushError: the Hub could not be reached or refused (one line, the HTTP status if any, no token).
    """
    folder = Path(folder)
    if not (folder / "README.md").is_file() or not (folder / "data").is_dir():
        raise DataError("not a Hub dataset folder (needs README.md and data/); write one with `vhx build`", file=str(folder))
    api = HfApi(token=token)
    readme = folder / "README.md"
    original = readme.read_text(encoding="utf-8")
    pushed = card_for_repo(original, folder, repo_id)
    try:
        api.create_repo(repo_id, repo_type="dataset", private=private, exist_ok=True)
        if pushed != original:
            from vhx.locking import atomic_write_text

            # the card (here and on the Hub) names the repo it was pushed to
            atomic_write_text(readme, pushed)
        commit = api.upload_folder(
            folder_path=str(folder),
            repo_id=repo_id,
            repo_type="dataset",
            revision=revision,
            commit_message=commit_message or f"Upload {folder.name} with vhx",
            allow_patterns=["README.md", "data/**"],
        )
    except BaseException as exc:
        if pushed != original and readme.read_text(encoding="utf-8") != original:
            atomic_write_text(readme, original)  # not pushed: the card keeps loading the folder
        if not isinstance(exc, Exception) or not _is_network_error(exc):
            raise
        raise _push_error(exc, repo_id, token) from None
    return str(getattr(commit, "commit_url", commit))


class PushError(VHXError):
    """Publishing a Hub folder failed: no network, or the Hub refused (authentication, rights, ...)."""


# where the Hub client's network failures come from (the HTTP library differs between versions)
_NETWORK_MODULES = ("huggingface_hub", "httpx", "httpx2", "httpcore", "httpcore2", "requests", "urllib3")


def _is_network_error(exc: BaseException) -> bool:
    return isinstance(exc, OSError) or type(exc).__module__.split(".")[0] in _NETWORK_MODULES


def _push_error(exc: BaseException, repo_id: str, token: str | None) -> PushError:
    """One line saying why the push failed, with no token in it whatever the server echoed."""
    from huggingface_hub import get_token

    status = getattr(getattr(exc, "response", None), "status_code", None)
    detail = next((line.strip() for line in str(exc).splitlines() if line.strip()), type(exc).__name__)
    why = f"the Hub answered HTTP {status}" if status else f"cannot reach the Hub ({type(exc).__name__})"
    message = f"push to {repo_id} failed: {why}: {detail}"
    for secret in {t for t in (token, get_token()) if t}:
        message = message.replace(secret, "***")
    return PushError(message)
