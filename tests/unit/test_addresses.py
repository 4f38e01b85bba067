"""The one address parser (``rocketpy.addresses``): its rules, its error type and its message."""

from __future__ import annotations

import pytest

from rocketpy.addresses import AddressError, parse_addr, parse_namesrv_addrs
from rocketpy.errors import MQClientError

BAD_ENTRY = "is not HOST:PORT: use a host name or IP and a port from 1 to 65535 (several separated by ';')"


@pytest.mark.parametrize(
    ("addr", "expected"),
    [
        ("127.0.0.1:9876", ("127.0.0.1", 9876)),
        (" ns-1.example:1 ", ("ns-1.example", 1)),
        ("h:65535", ("h", 65535)),
        ("[::1]:9876", ("::1", 9876)),
        ("::1:9876", ("::1", 9876)),
    ],
)
def test_parse_addr_accepts(addr: str, expected: tuple[str, int]) -> None:
    assert parse_addr(addr) == expected


NOT_ADDRESSES = ("nohost", ":9876", "h:", "h:0", "h:65536", "h:99999", "h:-1", "h:+1", "h:1a", "h:１２")


@pytest.mark.parametrize("addr", [*NOT_ADDRESSES, "a b:1", "[]:1", ""])
def test_parse_addr_refuses(addr: str) -> None:
    with pytest.raises(AddressError) as ei:
        parse_addr(addr)
    assert str(ei.value) == f"'{addr.strip()}' {BAD_ENTRY}"


def test_lists_split_on_semicolons_and_commas() -> None:
    assert parse_namesrv_addrs("a:1; b:2;") == ["a:1", "b:2"]
    assert parse_namesrv_addrs("a:1,b:2 , c:3") == ["a:1", "b:2", "c:3"]
    assert parse_namesrv_addrs("h:1;") == ["h:1"]


@pytest.mark.parametrize("value", [None, "", " ", " ; ", ",;"])
def test_an_empty_list_is_refused(value: str | None) -> None:
    with pytest.raises(AddressError) as ei:
        parse_namesrv_addrs(value)
    assert str(ei.value) == (
        "no NameServer address given: use HOST:PORT, several separated by ';' (or set NAMESRV_ADDR)"
    )


def test_a_bad_entry_is_named() -> None:
    with pytest.raises(AddressError) as ei:
        parse_namesrv_addrs("a:1;b:99999")
    assert str(ei.value) == f"'b:99999' {BAD_ENTRY}"
    with pytest.raises(AddressError, match="'a:1 b:2' is not HOST:PORT"):
        parse_namesrv_addrs("a:1 b:2")  # a blank is not a separator


def test_the_error_is_the_sdks_client_error() -> None:
    assert issubclass(AddressError, MQClientError)
    assert not AddressError.retriable
