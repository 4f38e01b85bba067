"""``plain_acl.yml``: the model of RocketMQ's plain ACL file and its parser.

The file (RocketMQ's format, ``distribution/conf/plain_acl.yml``)::

    globalWhiteRemoteAddresses: ["10.10.103.*", "192.168.0.*"]
    accounts:
      - accessKey: RocketMQ
        secretKey: 12345678          # read as the text "12345678", never as a number
        whiteRemoteAddress:
        admin: false
        defaultTopicPerm: DENY
        defaultGroupPerm: SUB
        topicPerms: [topicA=DENY, topicB=PUB|SUB, topicC=SUB]
        groupPerms: [groupA=DENY, groupB=PUB|SUB]

The parser walks PyYAML's node tree (``yaml.compose``) instead of loading Python objects, so every
scalar keeps the text the user wrote (``12345678``, ``0x1F``, ``yes`` stay strings) and every
mistake names its line: ``AclFileError("FILE:LINE: ...")``, a ``ConfigError`` (exit 2 at start-up).
``dataVersion``, written by RocketMQ's ``updateAclConfig`` tool, is accepted and ignored.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from rocketpy.acl.address import WhiteList
from rocketpy.acl.permission import DENY, parse_perm
from rocketpy.errors import ConfigError

#: RocketMQ's shortest accepted key and secret.
MIN_KEY_CHARS = 6
_NULL_TAG = "tag:yaml.org,2002:null"
_TOP_KEYS = ("globalWhiteRemoteAddresses", "accounts", "dataVersion")
_ACCOUNT_KEYS = (
    "accessKey",
    "secretKey",
    "whiteRemoteAddress",
    "admin",
    "defaultTopicPerm",
    "defaultGroupPerm",
    "topicPerms",
    "groupPerms",
)
_TRUE = ("true", "yes", "on")
_FALSE = ("false", "no", "off")


class AclFileError(ConfigError):
    """The ACL file cannot be read or is malformed; the message is ``FILE:LINE: what to fix``."""


@dataclass(frozen=True, eq=False)
class Account:
    """One ``accounts`` entry.

    Attributes:
        access_key: the account name sent as the ``AccessKey`` ext field.
        secret_key: the HMAC key (never logged, never in ``repr``).
        white_list: addresses from which this account is trusted without signature or permission check.
        admin: may send admin request codes.
        default_topic_perm: permission on topics absent from ``topic_perms``.
        default_group_perm: permission on groups absent from ``group_perms``.
        topic_perms: topic -> permission bits.
        group_perms: group -> permission bits.
        explicit_perms: True when the entry sets a default perm or a perm list (an admin account
            without any gets every resource, as RocketMQ's "admin without a perm map").
        line: the entry's line in the file.
    """

    access_key: str
    secret_key: str = field(repr=False)
    white_list: WhiteList
    admin: bool
    default_topic_perm: int
    default_group_perm: int
    topic_perms: dict[str, int]
    group_perms: dict[str, int]
    explicit_perms: bool
    line: int


@dataclass(frozen=True, eq=False)
class AclRules:
    """The parsed file: global white list and accounts by access key."""

    path: str
    global_white_list: WhiteList
    accounts: dict[str, Account]


def load_acl_file(path: str) -> AclRules:
    """Read and parse ``path`` (blocking: call from a thread inside a daemon).

    Raises:
        AclFileError: unreadable, malformed YAML, or a wrong shape or value (``FILE:LINE: ...``).
    """
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError) as e:
        reason = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
        raise AclFileError(
            f"error: {path}: cannot read the ACL file: {reason}; create it or point aclFile at it"
        ) from None
    return parse_acl_text(text, path)


def parse_acl_text(text: str, path: str = "plain_acl.yml") -> AclRules:
    """Parse the text of an ACL file (``path`` names it in errors).

    Raises:
        AclFileError: as ``load_acl_file``.
    """
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        line = mark.line + 1 if mark is not None else 1
        raise AclFileError(f"error: {path}:{line}: not valid YAML: {e.problem or e.context}") from None
    except yaml.YAMLError as e:
        raise AclFileError(f"error: {path}:1: not valid YAML: {e}") from None
    return _Parser(path).rules(root)


class _Parser:
    def __init__(self, path: str) -> None:
        self.path = path

    def fail(self, node: Node, message: str) -> AclFileError:
        return AclFileError(f"error: {self.path}:{node.start_mark.line + 1}: {message}")

    def rules(self, root: Node | None) -> AclRules:
        if root is None or _is_null(root):
            return AclRules(self.path, WhiteList([]), {})
        top = self.mapping(root, "the ACL file", _TOP_KEYS)
        white = self.white_list(top.get("globalWhiteRemoteAddresses"), "globalWhiteRemoteAddresses")
        accounts: dict[str, Account] = {}
        entries = top.get("accounts")
        for entry in self.sequence(entries, "accounts") if entries is not None else []:
            account = self.account(entry)
            if account.access_key in accounts:
                raise self.fail(
                    entry,
                    f"accessKey {account.access_key!r} is defined twice (first at line "
                    f"{accounts[account.access_key].line}); each account needs its own accessKey",
                )
            accounts[account.access_key] = account
        return AclRules(self.path, white, accounts)

    def account(self, node: Node) -> Account:
        fields = self.mapping(node, "an accounts entry", _ACCOUNT_KEYS)
        access_key = self.key_text(node, fields, "accessKey")
        secret_key = self.key_text(node, fields, "secretKey")
        white_node = fields.get("whiteRemoteAddress")
        white = self.white_list(white_node, "whiteRemoteAddress") if white_node is not None else WhiteList([])
        admin = self.boolean(fields.get("admin"), "admin")
        perm_keys = ("defaultTopicPerm", "defaultGroupPerm", "topicPerms", "groupPerms")
        return Account(
            access_key=access_key,
            secret_key=secret_key,
            white_list=white,
            admin=admin,
            default_topic_perm=self.perm(fields.get("defaultTopicPerm"), "defaultTopicPerm"),
            default_group_perm=self.perm(fields.get("defaultGroupPerm"), "defaultGroupPerm"),
            topic_perms=self.perm_list(fields.get("topicPerms"), "topicPerms"),
            group_perms=self.perm_list(fields.get("groupPerms"), "groupPerms"),
            explicit_perms=any(fields.get(k) is not None and not _is_null(fields[k]) for k in perm_keys),
            line=node.start_mark.line + 1,
        )

    # -- shapes -------------------------------------------------------------------------------

    def mapping(self, node: Node, what: str, known: tuple[str, ...]) -> dict[str, Node]:
        if not isinstance(node, MappingNode):
            raise self.fail(node, f"{what} must be a mapping of keys to values, got {_kind(node)}")
        out: dict[str, Node] = {}
        for key_node, value_node in node.value:
            key = self.scalar(key_node, "a key")
            if key not in known:
                close = difflib.get_close_matches(key, known, n=1)
                hint = f"; did you mean {close[0]!r}?" if close else f"; known keys: {', '.join(known)}"
                raise self.fail(key_node, f"unknown key {key!r} in {what}{hint}")
            if key in out:
                raise self.fail(key_node, f"key {key!r} appears twice in {what}")
            out[key] = value_node
        return out

    def sequence(self, node: Node, what: str) -> list[Node]:
        if _is_null(node):
            return []
        if not isinstance(node, SequenceNode):
            raise self.fail(node, f"{what} must be a list, got {_kind(node)}")
        return list(node.value)

    def scalar(self, node: Node, what: str) -> str:
        if not isinstance(node, ScalarNode):
            raise self.fail(node, f"{what} must be a single value, got {_kind(node)}")
        return str(node.value)

    def key_text(self, entry: Node, fields: dict[str, Node], name: str) -> str:
        node = fields.get(name)
        if node is None or _is_null(node):
            raise self.fail(entry, f"an accounts entry needs {name} (at least {MIN_KEY_CHARS} characters)")
        text = self.scalar(node, name)
        if len(text) < MIN_KEY_CHARS:
            raise self.fail(node, f"{name} must be at least {MIN_KEY_CHARS} characters long")
        return text

    def boolean(self, node: Node | None, name: str) -> bool:
        if node is None or _is_null(node):
            return False
        text = self.scalar(node, name).lower()
        if text in _TRUE:
            return True
        if text in _FALSE:
            return False
        raise self.fail(node, f"{name} must be true or false, got {node.value!r}")

    def perm(self, node: Node | None, name: str) -> int:
        if node is None or _is_null(node):
            return DENY  # RocketMQ: an unset default permission denies
        try:
            return parse_perm(self.scalar(node, name))
        except ValueError as e:
            raise self.fail(node, f"{name}: {e}") from None

    def perm_list(self, node: Node | None, name: str) -> dict[str, int]:
        out: dict[str, int] = {}
        for item in self.sequence(node, name) if node is not None else []:
            text = self.scalar(item, f"a {name} entry")
            resource, sep, perm_text = text.partition("=")
            if not sep or not resource.strip():
                raise self.fail(item, f"{name} entry {text!r} must be NAME=PERM, e.g. topicA=PUB|SUB")
            try:
                out[resource.strip()] = parse_perm(perm_text)
            except ValueError as e:
                raise self.fail(item, f"{name} entry {text!r}: {e}") from None
        return out

    def white_list(self, node: Node | None, name: str) -> WhiteList:
        if node is None or _is_null(node):
            return WhiteList([])
        items = self.sequence(node, name) if isinstance(node, SequenceNode) else [node]
        patterns = []
        for item in items:
            text = self.scalar(item, f"a {name} entry")
            try:
                WhiteList([text])
            except ValueError as e:
                raise self.fail(item, f"{name}: {e}") from None
            patterns.append(text)
        return WhiteList(patterns)


def _is_null(node: Node) -> bool:
    return isinstance(node, ScalarNode) and node.tag == _NULL_TAG


def _kind(node: Node) -> str:
    if isinstance(node, MappingNode):
        return "a mapping"
    if isinstance(node, SequenceNode):
        return "a list"
    return f"{node.value!r}"
