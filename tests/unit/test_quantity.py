"""Tests for machinery.quantity, ported from Kubernetes' quantity_test.go.

The tables follow TestQuantityParse (plus its "-" and "+" variants and its invalid list),
TestQuantityString, TestQuantityParseEmit, TestParseQuantity (values around int64),
TestNegativeValueRoundsAwayFromZero, TestQuantityCmp, TestAdd/TestSub/TestNeg,
TestMilliNewSet/TestNewSet and TestBinarySIZeroExponentString. Go's ``decQuantity(i, e, f)``
(the value i * 10^e) is ``_dec(i, e)`` nano-units here.
"""

from __future__ import annotations

import copy
import pickle

import pytest

from machinery.quantity import (
    BINARY_SI,
    DECIMAL_EXPONENT,
    DECIMAL_SI,
    ERR_FORMAT_WRONG,
    ERR_NUMERIC,
    ERR_SUFFIX,
    Quantity,
    QuantityError,
    bytes_value,
    canonical,
    milli_cpu,
    parse_quantity,
)

MAX_INT64 = 2**63 - 1
MIN_INT64 = -(2**63)


def _dec(i: int, exponent: int) -> int:
    """Go's decQuantity(i, exponent, _) in nano-units (exponent >= -9)."""
    return i * 10 ** (exponent + 9)


# ---------------------------------------------------------------- TestQuantityParse

PARSE_CASES: list[tuple[str, int, str]] = [
    ("0", _dec(0, 0), DECIMAL_SI),
    ("0n", _dec(0, 0), DECIMAL_SI),
    ("0u", _dec(0, 0), DECIMAL_SI),
    ("0m", _dec(0, 0), DECIMAL_SI),
    ("0Ki", _dec(0, 0), BINARY_SI),
    ("0k", _dec(0, 0), DECIMAL_SI),
    ("0Mi", _dec(0, 0), BINARY_SI),
    ("0M", _dec(0, 0), DECIMAL_SI),
    ("0Gi", _dec(0, 0), BINARY_SI),
    ("0G", _dec(0, 0), DECIMAL_SI),
    ("0Ti", _dec(0, 0), BINARY_SI),
    ("0T", _dec(0, 0), DECIMAL_SI),
    # Quantity less numbers are allowed
    ("1", _dec(1, 0), DECIMAL_SI),
    # Binary suffixes
    ("1Ki", _dec(1024, 0), BINARY_SI),
    ("8Ki", _dec(8 * 1024, 0), BINARY_SI),
    ("7Mi", _dec(7 * 1024**2, 0), BINARY_SI),
    ("6Gi", _dec(6 * 1024**3, 0), BINARY_SI),
    ("5Ti", _dec(5 * 1024**4, 0), BINARY_SI),
    ("4Pi", _dec(4 * 1024**5, 0), BINARY_SI),
    ("3Ei", _dec(3 * 1024**6, 0), BINARY_SI),
    ("10Ti", _dec(10 * 1024**4, 0), BINARY_SI),
    ("100Ti", _dec(100 * 1024**4, 0), BINARY_SI),
    # Decimal suffixes
    ("5n", _dec(5, -9), DECIMAL_SI),
    ("4u", _dec(4, -6), DECIMAL_SI),
    ("3m", _dec(3, -3), DECIMAL_SI),
    ("9", _dec(9, 0), DECIMAL_SI),
    ("8k", _dec(8, 3), DECIMAL_SI),
    ("50k", _dec(5, 4), DECIMAL_SI),
    ("7M", _dec(7, 6), DECIMAL_SI),
    ("6G", _dec(6, 9), DECIMAL_SI),
    ("5T", _dec(5, 12), DECIMAL_SI),
    ("40T", _dec(4, 13), DECIMAL_SI),
    ("300T", _dec(3, 14), DECIMAL_SI),
    ("2P", _dec(2, 15), DECIMAL_SI),
    ("1E", _dec(1, 18), DECIMAL_SI),
    # Decimal exponents
    ("1E-3", _dec(1, -3), DECIMAL_EXPONENT),
    ("1e3", _dec(1, 3), DECIMAL_EXPONENT),
    ("1E6", _dec(1, 6), DECIMAL_EXPONENT),
    ("1e9", _dec(1, 9), DECIMAL_EXPONENT),
    ("1E12", _dec(1, 12), DECIMAL_EXPONENT),
    ("1e15", _dec(1, 15), DECIMAL_EXPONENT),
    ("1E18", _dec(1, 18), DECIMAL_EXPONENT),
    # Nonstandard but still parsable
    ("1e14", _dec(1, 14), DECIMAL_EXPONENT),
    ("1e13", _dec(1, 13), DECIMAL_EXPONENT),
    ("100.035k", _dec(100035, 0), DECIMAL_SI),
    # Things that look like floating point
    ("0.001", _dec(1, -3), DECIMAL_SI),
    ("0.0005k", _dec(5, -1), DECIMAL_SI),
    ("0.005", _dec(5, -3), DECIMAL_SI),
    ("0.05", _dec(5, -2), DECIMAL_SI),
    ("0.5", _dec(5, -1), DECIMAL_SI),
    ("0.00050k", _dec(5, -1), DECIMAL_SI),
    ("0.00500", _dec(5, -3), DECIMAL_SI),
    ("0.05000", _dec(5, -2), DECIMAL_SI),
    ("0.50000", _dec(5, -1), DECIMAL_SI),
    ("0.5e0", _dec(5, -1), DECIMAL_EXPONENT),
    ("0.5e-1", _dec(5, -2), DECIMAL_EXPONENT),
    ("0.5e-2", _dec(5, -3), DECIMAL_EXPONENT),
    ("10.035M", _dec(10035, 3), DECIMAL_SI),
    ("1.2e3", _dec(12, 2), DECIMAL_EXPONENT),
    ("1.3E+6", _dec(13, 5), DECIMAL_EXPONENT),
    ("1.40e9", _dec(14, 8), DECIMAL_EXPONENT),
    ("1.53E12", _dec(153, 10), DECIMAL_EXPONENT),
    ("1.6e15", _dec(16, 14), DECIMAL_EXPONENT),
    ("1.7E18", _dec(17, 17), DECIMAL_EXPONENT),
    ("9.01", _dec(901, -2), DECIMAL_SI),
    ("8.1k", _dec(81, 2), DECIMAL_SI),
    ("7.123456M", _dec(7123456, 0), DECIMAL_SI),
    ("6.987654321G", _dec(6987654321, 0), DECIMAL_SI),
    ("5.444T", _dec(5444, 9), DECIMAL_SI),
    ("40.1T", _dec(401, 11), DECIMAL_SI),
    ("300.2T", _dec(3002, 11), DECIMAL_SI),
    ("2.5P", _dec(25, 14), DECIMAL_SI),
    ("1.01E", _dec(101, 16), DECIMAL_SI),
    # Things that saturate/round
    ("3.001n", _dec(4, -9), DECIMAL_SI),
    ("1.1E-9", _dec(2, -9), DECIMAL_EXPONENT),
    ("0.0000000001", _dec(1, -9), DECIMAL_SI),
    ("0.0000000005", _dec(1, -9), DECIMAL_SI),
    ("0.00000000050", _dec(1, -9), DECIMAL_SI),
    ("0.5e-9", _dec(1, -9), DECIMAL_EXPONENT),
    ("0.9n", _dec(1, -9), DECIMAL_SI),
    ("0.00000012345", _dec(124, -9), DECIMAL_SI),
    ("0.00000012354", _dec(124, -9), DECIMAL_SI),
    ("9Ei", _dec(MAX_INT64, 0), BINARY_SI),
    ("9223372036854775807Ki", _dec(MAX_INT64, 0), BINARY_SI),
    ("12E", _dec(12, 18), DECIMAL_SI),
    # We'll accept fractional binary stuff, too.
    ("100.035Ki", _dec(10243584, -2), BINARY_SI),
    ("0.5Mi", _dec(512 * 1024, 0), BINARY_SI),
    ("0.05Gi", _dec(536870912, -1), BINARY_SI),
    ("0.025Ti", _dec(274877906944, -1), BINARY_SI),
    # Things written by trolls
    ("0.000000000001Ki", _dec(2, -9), DECIMAL_SI),  # rounds up, changes format
    (".001", _dec(1, -3), DECIMAL_SI),
    (".0001k", _dec(100, -3), DECIMAL_SI),
    ("1.", _dec(1, 0), DECIMAL_SI),
    ("1.G", _dec(1, 9), DECIMAL_SI),
]


@pytest.mark.parametrize("prefix", ["", "-", "+"], ids=["plain", "minus", "plus"])
@pytest.mark.parametrize(("text", "nanos", "fmt"), PARSE_CASES, ids=[c[0] for c in PARSE_CASES])
def test_parse(prefix: str, text: str, nanos: int, fmt: str) -> None:
    q = parse_quantity(prefix + text)
    assert q.nanos == (-nanos if prefix == "-" else nanos)
    assert q.format == fmt
    # the printed form parses back to the same value
    assert parse_quantity(str(q)) == q


# ---------------------------------------------------------------- invalid input

INVALID_CASES: list[tuple[str, str]] = [
    # TestQuantityParse's invalid list
    ("1.1.M", ERR_FORMAT_WRONG),
    ("1+1.0M", ERR_FORMAT_WRONG),
    ("0.1mi", ERR_SUFFIX),
    ("0.1am", ERR_FORMAT_WRONG),
    ("aoeu", ERR_FORMAT_WRONG),
    (".5i", ERR_SUFFIX),
    ("1i", ERR_SUFFIX),
    ("-3.01i", ERR_SUFFIX),
    ("-3.01e-", ERR_SUFFIX),
    ("1e4294967297", ERR_SUFFIX),  # exponent outside int32 is rejected, not truncated
    (" 1", ERR_FORMAT_WRONG),
    ("1 ", ERR_FORMAT_WRONG),
    # more, checked against Go's scanner and suffix tables
    ("", ERR_FORMAT_WRONG),
    ("1.5.5", ERR_FORMAT_WRONG),
    ("10Qi", ERR_FORMAT_WRONG),
    ("Non-Numeric", ERR_FORMAT_WRONG),
    ("1e", ERR_SUFFIX),
    ("1E+", ERR_SUFFIX),
    ("1K", ERR_SUFFIX),
    ("1ki", ERR_SUFFIX),
    ("1KiB", ERR_FORMAT_WRONG),
    ("1mi", ERR_SUFFIX),
    ("1Ki5", ERR_SUFFIX),
    ("1ee5", ERR_SUFFIX),
    ("1e5e5", ERR_FORMAT_WRONG),
    ("1-5", ERR_SUFFIX),
    ("--1", ERR_SUFFIX),
    ("1,5", ERR_FORMAT_WRONG),
    ("1_000", ERR_FORMAT_WRONG),
    ("\u0661", ERR_FORMAT_WRONG),  # ARABIC-INDIC DIGIT ONE: not an ASCII digit
    ("1E2147483648", ERR_SUFFIX),
    ("1E-2147483648", ERR_SUFFIX),
    ("1E9223372036854775808", ERR_SUFFIX),
    # Go's slow path finds no digits in these (the fast path turns "Ki" or "." into zero)
    ("Ei", ERR_NUMERIC),
    ("Pi", ERR_NUMERIC),
    ("-Ei", ERR_NUMERIC),
    ("e-10", ERR_NUMERIC),
    (".e-10", ERR_NUMERIC),
]


@pytest.mark.parametrize(("text", "message"), INVALID_CASES, ids=[repr(c[0]) for c in INVALID_CASES])
def test_parse_invalid(text: str, message: str) -> None:
    with pytest.raises(QuantityError) as info:
        parse_quantity(text)
    assert str(info.value) == message
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize("text", ["1e1000", "1" + "0" * 1000, "0.1e1001", "1" + "0" * 990 + "P", "1e2147483647"])
def test_parse_rejects_values_of_1e1000_and_more(text: str) -> None:
    """Not a Go error: kplane's bound so that a string cannot allocate a gigantic integer."""
    with pytest.raises(QuantityError, match="too large"):
        parse_quantity(text)


def test_parse_accepts_values_just_below_1e1000() -> None:
    assert str(parse_quantity("9" * 1000)) == "9" * 1000
    assert str(parse_quantity("1e999")) == "1e999"
    assert str(parse_quantity("-0.9e1000")) == "-9e999"
    assert str(parse_quantity("1" + "0" * 999)) == "1e999"  # DecimalSI past E: exponent form
    assert str(parse_quantity("1000000000Ei")) == "9223372036854775807"  # BinarySI caps instead


# ---------------------------------------------------------------- Go parse quirks

QUIRK_CASES: list[tuple[str, int, str, str]] = [
    # input, nanos, format, str(): Go's scanner turns a number without digits into zero
    # on its int64 fast path ...
    ("Ki", 0, BINARY_SI, "0"),
    ("Ti", 0, BINARY_SI, "0"),
    ("m", 0, DECIMAL_SI, "0"),
    ("k", 0, DECIMAL_SI, "0"),
    (".", 0, DECIMAL_SI, "0"),
    ("-.", 0, DECIMAL_SI, "0"),
    ("-", 0, DECIMAL_SI, "0"),
    ("+", 0, DECIMAL_SI, "0"),
    (".Ki", 0, BINARY_SI, "0"),
    ("e5", 0, DECIMAL_EXPONENT, "0"),
    ("-0", 0, DECIMAL_SI, "0"),
    ("00", 0, DECIMAL_SI, "0"),
    ("0e2147483647", 0, DECIMAL_EXPONENT, "0"),
    # ... and keeps the input text as the printed form when it looks canonical there.
    ("+1", _dec(1, 0), DECIMAL_SI, "+1"),
    ("01", _dec(1, 0), DECIMAL_SI, "01"),
    ("1.", _dec(1, 0), DECIMAL_SI, "1."),
    ("1.G", _dec(1, 9), DECIMAL_SI, "1.G"),
    ("1.500", _dec(15, -1), DECIMAL_SI, "1.500"),
    ("1e0", _dec(1, 0), DECIMAL_EXPONENT, "1e0"),
    ("1.Ki", _dec(1024, 0), BINARY_SI, "1.Ki"),
    ("+3Ki", _dec(3072, 0), BINARY_SI, "+3Ki"),
    # not kept: a multiple of 8 (binary), trailing "000", a leading "0", scale not /3,
    # or Go's big-number path (over 18 digits, Pi/Ei, fractions of binary units)
    ("+8Ki", _dec(8192, 0), BINARY_SI, "8Ki"),
    ("+1000", _dec(1, 3), DECIMAL_SI, "1k"),
    ("+0.5", _dec(5, -1), DECIMAL_SI, "500m"),
    ("+1.5", _dec(15, -1), DECIMAL_SI, "1500m"),
    ("+1Pi", _dec(1024**5, 0), BINARY_SI, "1Pi"),
    ("+100Ti", _dec(100 * 1024**4, 0), BINARY_SI, "100Ti"),
    ("+0001000000000000000001", _dec(1000000000000000001, 0), DECIMAL_SI, "1000000000000000001"),
]


@pytest.mark.parametrize(("text", "nanos", "fmt", "printed"), QUIRK_CASES, ids=[c[0] for c in QUIRK_CASES])
def test_go_parse_quirks(text: str, nanos: int, fmt: str, printed: str) -> None:
    q = parse_quantity(text)
    assert (q.nanos, q.format, str(q)) == (nanos, fmt, printed)


def test_extreme_exponents_and_long_inputs_stay_exact() -> None:
    assert parse_quantity("1e-2147483647").nanos == 1
    assert parse_quantity("-1e-2147483647").nanos == -1
    assert parse_quantity("0." + "0" * 5000 + "1").nanos == 1
    tiny_binary = parse_quantity("0." + "0" * 5000 + "1Ki")
    assert (tiny_binary.nanos, tiny_binary.format) == (1, DECIMAL_SI)
    long_fraction = parse_quantity("1." + "3" * 6000)
    assert long_fraction.nanos == 1_333_333_334
    assert parse_quantity("2." + "0" * 6000 + "1Ki").nanos == 2048 * 10**9 + 1
    long_exponent = parse_quantity("5" * 6000 + "e-5999")
    assert (long_exponent.nanos, long_exponent.format) == (5_555_555_556, DECIMAL_EXPONENT)
    assert parse_quantity("1" * 900 + "." + "1" * 6000).value() == int("1" * 899 + "2")


# ---------------------------------------------------------------- TestQuantityString

STRING_CASES: list[tuple[int, str, str, str]] = [
    # nanos, format, expected str(), an alternate spelling that parses to the same str()
    (_dec(1024**3, 0), BINARY_SI, "1Gi", "1024Mi"),
    (_dec(300 * 1024**2, 0), BINARY_SI, "300Mi", "307200Ki"),
    (_dec(6 * 1024, 0), BINARY_SI, "6Ki", ""),
    (_dec(1001 * 1024**3, 0), BINARY_SI, "1001Gi", "1025024Mi"),
    (_dec(1024**4, 0), BINARY_SI, "1Ti", "1024Gi"),
    (_dec(5, 0), BINARY_SI, "5", "5000m"),
    (_dec(500, -3), BINARY_SI, "500m", "0.5"),
    (_dec(1, 9), DECIMAL_SI, "1G", "1000M"),
    (_dec(1000, 6), DECIMAL_SI, "1G", "0.001T"),
    (_dec(1000000, 3), DECIMAL_SI, "1G", ""),
    (_dec(1000000000, 0), DECIMAL_SI, "1G", ""),
    (_dec(1, -3), DECIMAL_SI, "1m", "1000u"),
    (_dec(80, -3), DECIMAL_SI, "80m", ""),
    (_dec(1080, -3), DECIMAL_SI, "1080m", "1.08"),
    (_dec(108, -2), DECIMAL_SI, "1080m", "1080000000n"),
    (_dec(300, 6), DECIMAL_SI, "300M", ""),
    (_dec(1, 12), DECIMAL_SI, "1T", ""),
    # DecimalSI has no suffix past E: exponent form keeps the magnitude
    (_dec(1, 18), DECIMAL_SI, "1E", ""),
    (_dec(1, 21), DECIMAL_SI, "1e21", "1000E"),
    (_dec(5, 21), DECIMAL_SI, "5e21", "5000E"),
    (_dec(1, 24), DECIMAL_SI, "1e24", "1000000E"),
    # BinarySI has no suffix past Ei: exact decimal instead
    (_dec(1, 70), BINARY_SI, "10e69", ""),
    (_dec(2, 70), BINARY_SI, "20e69", ""),
    (_dec(1, 72), BINARY_SI, "1e72", ""),
    (_dec(1234567, 6), DECIMAL_SI, "1234567M", ""),
    (_dec(1234567, -3), BINARY_SI, "1234567m", ""),
    (_dec(3, 3), DECIMAL_SI, "3k", ""),
    (_dec(1025, 0), BINARY_SI, "1025", ""),
    (_dec(0, 0), DECIMAL_SI, "0", ""),
    (_dec(0, 0), BINARY_SI, "0", ""),
    (_dec(1, 9), DECIMAL_EXPONENT, "1e9", ".001e12"),
    (_dec(1, -3), DECIMAL_EXPONENT, "1e-3", "0.001e0"),
    (_dec(1, -9), DECIMAL_EXPONENT, "1e-9", "1000e-12"),
    (_dec(80, -3), DECIMAL_EXPONENT, "80e-3", ""),
    (_dec(300, 6), DECIMAL_EXPONENT, "300e6", ""),
    (_dec(1, 12), DECIMAL_EXPONENT, "1e12", ""),
    (_dec(1, 3), DECIMAL_EXPONENT, "1e3", ""),
    (_dec(3, 3), DECIMAL_EXPONENT, "3e3", ""),
    (_dec(0, 0), DECIMAL_EXPONENT, "0", "00"),
    (_dec(1, -9), DECIMAL_SI, "1n", ""),
    (_dec(80, -9), DECIMAL_SI, "80n", ""),
    (_dec(1080, -9), DECIMAL_SI, "1080n", ""),
    (_dec(108, -8), DECIMAL_SI, "1080n", ""),
    (_dec(1, -6), DECIMAL_SI, "1u", ""),
    (_dec(80, -6), DECIMAL_SI, "80u", ""),
    (_dec(1080, -6), DECIMAL_SI, "1080u", ""),
]


@pytest.mark.parametrize(("nanos", "fmt", "expect", "alternate"), STRING_CASES,
                         ids=[f"{c[2]}-{c[1]}" for c in STRING_CASES])
def test_string(nanos: int, fmt: str, expect: str, alternate: str) -> None:
    q = Quantity.from_nanos(nanos, fmt)
    assert str(q) == expect
    assert str(parse_quantity(expect)) == expect
    assert parse_quantity(expect) == q
    if alternate:
        assert str(parse_quantity(alternate)) == expect
    if nanos:
        assert str(-q) == "-" + expect
        assert parse_quantity("-" + expect) == -q


BINARY_TEXT_CASES: list[tuple[int, str]] = [
    # TestBinarySIZeroExponentString and TestBinarySIPastEiArithmeticRoundTrip
    (2000, "2000"),
    (-2000, "-2000"),
    (1023, "1023"),
    (1536, "1536"),
    (2**63, "8Ei"),
    (2**64, "16Ei"),
    (2**70, "1180591620717411303424"),
]


@pytest.mark.parametrize(("units", "expect"), BINARY_TEXT_CASES, ids=[c[1] for c in BINARY_TEXT_CASES])
def test_binary_si_text(units: int, expect: str) -> None:
    q = Quantity.from_int(units, BINARY_SI)
    assert str(q) == expect
    if units < 2**63:
        assert parse_quantity(expect).nanos == q.nanos


def test_binary_past_ei_by_arithmetic_round_trips() -> None:
    q = parse_quantity("1Ei")
    for _ in range(10):  # 1Ei * 1024
        q = q + q
    assert str(q) == "1180591620717411303424"
    assert parse_quantity(str(q)) == q


# ---------------------------------------------------------------- TestQuantityParseEmit

EMIT_CASES: list[tuple[str, str]] = [
    ("1Ki", "1Ki"),
    ("1Mi", "1Mi"),
    ("1Gi", "1Gi"),
    ("1024Mi", "1Gi"),
    ("1000M", "1G"),
    (".001Ki", "1024m"),
    (".000001Ki", "1024u"),
    (".000000001Ki", "1024n"),
    (".000000000001Ki", "2n"),
    # the cases of the task that uses this module
    ("1.5", "1500m"),
    ("1.5Gi", "1536Mi"),
    ("0.5Gi", "512Mi"),
    ("1536", "1536"),
    ("1000", "1k"),
    ("1e3", "1e3"),
    ("0.3Ki", "307200m"),
    ("-1", "-1"),
    ("100m", "100m"),
    ("0.1", "100m"),
    ("2048Ki", "2Mi"),
    ("1.5Ki", "1536"),
    ("1.1Ki", "1126400m"),
    ("0.1n", "1n"),
    ("8Ei", "9223372036854775807"),
]


@pytest.mark.parametrize(("text", "expect"), EMIT_CASES, ids=[c[0] for c in EMIT_CASES])
def test_parse_emit(text: str, expect: str) -> None:
    assert canonical(text) == expect
    if parse_quantity(text).is_zero() or text.startswith("-"):
        return
    assert canonical("-" + text) == "-" + expect


# ---------------------------------------------------------------- TestParseQuantity (int64 edges)

BIG_CASES: list[tuple[str, str]] = [
    # input, str() when different from the input
    ("-999999999999999999", ""),
    ("999999999999999999", ""),
    ("-999999999999999999.0", "-999999999999999999"),
    ("999999999999999999.0", "999999999999999999"),
    ("-999999999999999999.1", "-999999999999999999100m"),
    ("999999999999999999.1", "999999999999999999100m"),
    ("-9999999999999999999", ""),
    ("9999999999999999999", ""),
    ("-1E", ""),
    ("1E", ""),
    ("-1000000000000000000", "-1E"),
    ("1000000000000000000", "1E"),
    ("-9999999999999999999.0", "-9999999999999999999"),
    ("9999999999999999999.0", "9999999999999999999"),
    ("-1.0E", "-1E"),
    ("1.0E", "1E"),
    ("-1000000000000000000.0", "-1E"),
    ("1000000000000000000.0", "1E"),
    ("-9999999999999999999000m", "-9999999999999999999"),
    ("9999999999999999999000m", "9999999999999999999"),
    ("-9999999999999999999.1", "-9999999999999999999100m"),
    ("9999999999999999999.1", "9999999999999999999100m"),
    ("-1.0000000000000000001E", "-1000000000000000000100m"),
    ("1.0000000000000000001E", "1000000000000000000100m"),
    ("-1000000000000000000.1", "-1000000000000000000100m"),
    ("1000000000000000000.1", "1000000000000000000100m"),
    ("-1.000000000000000001E", "-1000000000000000001"),
    ("1.000000000000000001E", "1000000000000000001"),
    ("-1000000000000000001", ""),
    ("1000000000000000001", ""),
    ("-10E", ""),
    ("10E", ""),
    ("-10000000000000000000", "-10E"),
    ("10000000000000000000", "10E"),
    ("-10.0E", "-10E"),
    ("10.0E", "10E"),
    ("-10000000000000000000.0", "-10E"),
    ("10000000000000000000.0", "10E"),
    ("-10000000000000000000000m", "-10E"),
    ("10000000000000000000000m", "10E"),
    ("-10.0000000000000000001E", "-10000000000000000000100m"),
    ("10.0000000000000000001E", "10000000000000000000100m"),
    ("-10000000000000000000.1", "-10000000000000000000100m"),
    ("10000000000000000000.1", "10000000000000000000100m"),
    ("-10.000000000000000001E", "-10000000000000000001"),
    ("10.000000000000000001E", "10000000000000000001"),
    ("-10000000000000000001", ""),
    ("10000000000000000001", ""),
    ("-9223372036854775809", ""),
    ("9223372036854775806", ""),
    ("-9223372036854775809.0", "-9223372036854775809"),
    ("9223372036854775806.0", "9223372036854775806"),
    ("-9223372036854775809000m", "-9223372036854775809"),
    ("9223372036854775806000m", "9223372036854775806"),
    ("-9223372036854775809.1", "-9223372036854775809100m"),
    ("9223372036854775806.1", "9223372036854775806100m"),
    ("-9223372036854775808", ""),
    ("9223372036854775807", ""),
    ("-9223372036854775808.0", "-9223372036854775808"),
    ("9223372036854775807.0", "9223372036854775807"),
    ("-9223372036854775808000m", "-9223372036854775808"),
    ("9223372036854775807000m", "9223372036854775807"),
    ("-9223372036854775808.1", "-9223372036854775808100m"),
    ("9223372036854775807.1", "9223372036854775807100m"),
    ("-9223372036854775807", ""),
    ("9223372036854775808", ""),
    ("-9223372036854775807.0", "-9223372036854775807"),
    ("9223372036854775808.0", "9223372036854775808"),
    ("-9223372036854775807000m", "-9223372036854775807"),
    ("9223372036854775808000m", "9223372036854775808"),
    ("-9223372036854775807.1", "-9223372036854775807100m"),
    ("9223372036854775808.1", "9223372036854775808100m"),
]


@pytest.mark.parametrize(("text", "expect"), BIG_CASES, ids=[c[0] for c in BIG_CASES])
def test_parse_around_int64(text: str, expect: str) -> None:
    q = parse_quantity(text)
    assert str(q) == (expect or text)
    # the value is exact: compare with the decimal text itself
    number = text[:-1] if text.endswith(("m", "E")) else text
    whole, _, frac = number.lstrip("-").partition(".")
    scale = {"m": 6, "E": 27}.get(text[-1], 9)
    exact = int(whole) * 10**scale + (int(frac.ljust(scale, "0")) if frac else 0)
    assert q.nanos == (-exact if text.startswith("-") else exact)


# ---------------------------------------------------------------- Value / MilliValue

VALUE_CASES: list[tuple[str, int, int]] = [
    # TestNegativeValueRoundsAwayFromZero: input, value(), milli_value()
    ("-.484785E-7466", -1, -1),
    (".484785E-7466", 1, 1),
    ("-.484785E-1", -1, -49),
    (".484785E-1", 1, 49),
    ("-0.0005", -1, -1),
    ("0.0005", 1, 1),
    ("-1500m", -2, -1500),
    ("1500m", 2, 1500),
    ("-9.5000000001Gi", -10200547329, -10200547328108),
    ("9.5000000001Gi", 10200547329, 10200547328108),
    ("-1", -1, -1000),
    ("1", 1, 1000),
    ("0", 0, 0),
    # more
    ("1Mi", 1024 * 1024, 1024 * 1024 * 1000),
    ("1n", 1, 1),
    ("1u", 1, 1),
    ("1001u", 1, 2),
    ("999m", 1, 999),
    ("1.5Ki", 1536, 1536000),
    ("0.3Ki", 308, 307200),
    ("9223372036854775807", MAX_INT64, MAX_INT64 * 1000),  # exact, where Go's int64 would wrap
    ("1E", 10**18, 10**21),
    ("8Ei", MAX_INT64, MAX_INT64 * 1000),
]


@pytest.mark.parametrize(("text", "value", "milli"), VALUE_CASES, ids=[c[0] for c in VALUE_CASES])
def test_value_and_milli_value(text: str, value: int, milli: int) -> None:
    q = parse_quantity(text)
    assert q.value() == value
    assert q.milli_value() == milli
    assert bytes_value(text) == value
    assert milli_cpu(text) == milli


# ---------------------------------------------------------------- comparison

CMP_CASES: list[tuple[str, str, int]] = [
    ("0", "0", 0),
    ("100m", "50m", 1),
    ("50m", "100m", -1),
    ("10000T", "100Gi", 1),
    ("1", "1000m", 0),
    ("1Ki", "1024", 0),
    ("1k", "1Ki", -1),
    ("1e3", "1k", 0),
    ("1Gi", "1073741824", 0),
    ("1G", "1Gi", -1),
    ("-1", "0", -1),
    ("-1Ki", "-1k", -1),
    ("0Ki", "0m", 0),
    ("0.1n", "1n", 0),
    ("9Ei", "8Ei", 0),  # both capped at 2^63-1
    ("9223372036854775808", "8Ei", 1),
    ("1E", "999999999999999999", 1),
]


@pytest.mark.parametrize(("x", "y", "expect"), CMP_CASES, ids=[f"{c[0]}~{c[1]}" for c in CMP_CASES])
def test_compare(x: str, y: str, expect: int) -> None:
    a, b = parse_quantity(x), parse_quantity(y)
    assert (a == b) is (expect == 0)
    assert (a != b) is (expect != 0)
    assert (a < b) is (expect < 0)
    assert (a <= b) is (expect <= 0)
    assert (a > b) is (expect > 0)
    assert (a >= b) is (expect >= 0)
    assert (b < a) is (expect > 0)
    if expect == 0:
        assert hash(a) == hash(b)


def test_hash_and_equality_use_the_exact_value() -> None:
    assert len({parse_quantity(s) for s in ["1", "1000m", "1e0", "0.001k", "1000000000n"]}) == 1
    assert {parse_quantity("1Ki"): "x"}[parse_quantity("1024")] == "x"
    assert parse_quantity("1") != "1"
    assert parse_quantity("0") != 0
    with pytest.raises(TypeError):
        _ = parse_quantity("1") < 2


# ---------------------------------------------------------------- arithmetic

ADD_CASES: list[tuple[int, str, int, str, int, str]] = [
    # TestAdd: a, b, expected (nanos, format)
    (_dec(10, 0), DECIMAL_SI, _dec(1, 1), DECIMAL_SI, _dec(20, 0), DECIMAL_SI),
    (_dec(10, 0), DECIMAL_SI, _dec(1, 0), BINARY_SI, _dec(11, 0), DECIMAL_SI),
    (_dec(10, 0), BINARY_SI, _dec(1, 0), DECIMAL_SI, _dec(11, 0), BINARY_SI),
    (0, DECIMAL_SI, _dec(50, 0), DECIMAL_SI, _dec(50, 0), DECIMAL_SI),
    (_dec(50, 0), DECIMAL_SI, 0, DECIMAL_SI, _dec(50, 0), DECIMAL_SI),
    (0, DECIMAL_SI, 0, DECIMAL_SI, 0, DECIMAL_SI),
    # a zero left operand takes the right operand's format (Go's Add)
    (0, DECIMAL_SI, _dec(1024, 0), BINARY_SI, _dec(1024, 0), BINARY_SI),
    (_dec(MAX_INT64, 0), DECIMAL_SI, _dec(MAX_INT64, 0), DECIMAL_SI, _dec(2 * MAX_INT64, 0), DECIMAL_SI),
]


@pytest.mark.parametrize(("a", "af", "b", "bf", "nanos", "fmt"), ADD_CASES)
def test_add(a: int, af: str, b: int, bf: str, nanos: int, fmt: str) -> None:
    result = Quantity.from_nanos(a, af) + Quantity.from_nanos(b, bf)
    assert (result.nanos, result.format) == (nanos, fmt)


SUB_CASES: list[tuple[int, str, int, str, int, str]] = [
    # TestSub: a, b, expected (nanos, format)
    (_dec(10, 0), DECIMAL_SI, _dec(1, 1), DECIMAL_SI, 0, DECIMAL_SI),
    (_dec(10, 0), DECIMAL_SI, _dec(1, 0), BINARY_SI, _dec(9, 0), DECIMAL_SI),
    (_dec(10, 0), BINARY_SI, _dec(1, 0), DECIMAL_SI, _dec(9, 0), BINARY_SI),
    (0, DECIMAL_SI, _dec(50, 0), DECIMAL_SI, _dec(-50, 0), DECIMAL_SI),
    (_dec(50, 0), DECIMAL_SI, 0, DECIMAL_SI, _dec(50, 0), DECIMAL_SI),
    (0, DECIMAL_SI, 0, DECIMAL_SI, 0, DECIMAL_SI),
    # TestNegAndSubAtMostNegative / TestZeroSubMostNegativeInheritsFormat: no wrapping
    (0, DECIMAL_SI, _dec(MIN_INT64, 0), DECIMAL_SI, _dec(2**63, 0), DECIMAL_SI),
    (_dec(1, 0), DECIMAL_SI, _dec(MIN_INT64, 0), DECIMAL_SI, _dec(2**63 + 1, 0), DECIMAL_SI),
    (_dec(1, 1), DECIMAL_SI, _dec(MIN_INT64, 0), DECIMAL_SI, _dec(2**63 + 10, 0), DECIMAL_SI),
    (0, DECIMAL_SI, _dec(MIN_INT64, 0), BINARY_SI, _dec(2**63, 0), BINARY_SI),
]


@pytest.mark.parametrize(("a", "af", "b", "bf", "nanos", "fmt"), SUB_CASES)
def test_sub(a: int, af: str, b: int, bf: str, nanos: int, fmt: str) -> None:
    result = Quantity.from_nanos(a, af) - Quantity.from_nanos(b, bf)
    assert (result.nanos, result.format) == (nanos, fmt)


def test_sub_past_int64_prints_exactly() -> None:
    assert str(Quantity.from_int(0) - Quantity.from_int(MIN_INT64)) == "9223372036854775808"
    assert str(Quantity.from_int(1) - Quantity.from_int(MIN_INT64)) == "9223372036854775809"
    assert str(Quantity.from_milli(1) - Quantity.from_milli(MIN_INT64)) == "9223372036854775809m"
    assert str(Quantity.from_int(0) - Quantity.from_int(MIN_INT64, BINARY_SI)) == "8Ei"


@pytest.mark.parametrize("text", ["100m", "1Gi", "1e3", "-5Ki"])
def test_add_and_sub_zero_preserve_suffix(text: str) -> None:
    value, zero = parse_quantity(text), parse_quantity("0")
    assert str(value + zero) == text
    assert str(zero + value) == text
    assert str(value - zero) == text
    assert str(zero - value) == str(-value)


NEG_CASES: list[tuple[int, str, str]] = [
    # TestQuantityNeg / TestNeg: nanos, format, str() of the negation
    (_dec(901, -2), DECIMAL_SI, "-9010m"),
    (0, DECIMAL_SI, "0"),
    (_dec(10, 0), BINARY_SI, "-10"),
    (_dec(-10, 0), BINARY_SI, "10"),
    (_dec(2048, 0), BINARY_SI, "-2Ki"),
    (_dec(MIN_INT64, 0), DECIMAL_SI, "9223372036854775808"),
    (_dec(MIN_INT64, -3), DECIMAL_SI, "9223372036854775808m"),
]


@pytest.mark.parametrize(("nanos", "fmt", "expect"), NEG_CASES)
def test_neg(nanos: int, fmt: str, expect: str) -> None:
    q = Quantity.from_nanos(nanos, fmt)
    negated = -q
    assert str(negated) == expect
    assert negated.format == fmt
    assert -negated == q
    assert q.nanos == nanos  # the source is untouched
    assert +q is q


def test_add_sub_round_trip() -> None:
    total = Quantity.from_int(0)
    parts = [Quantity.from_nanos(7**i * 10 ** (i % 20), DECIMAL_SI) for i in range(100)]
    for p in parts:
        total = total + p
    for p in parts:
        total = total - p
    assert total.is_zero()


def test_arithmetic_rejects_other_types() -> None:
    q = parse_quantity("1")
    with pytest.raises(TypeError):
        _ = q + 1
    with pytest.raises(TypeError):
        _ = q - "1"


# ---------------------------------------------------------------- constructors

CONSTRUCT_CASES: list[tuple[str, int, str, str]] = [
    # TestMilliNewSet: from_milli
    ("milli", 1, DECIMAL_SI, "1m"),
    ("milli", 1000, DECIMAL_SI, "1"),
    ("milli", 1234000, DECIMAL_SI, "1234"),
    ("milli", 1024, BINARY_SI, "1024m"),
    ("milli", 1000000, DECIMAL_EXPONENT, "1e3"),
    ("milli", 1024 * 1024, BINARY_SI, "1048576m"),
    # TestNewSet: from_int
    ("int", 1, DECIMAL_SI, "1"),
    ("int", 1000, DECIMAL_SI, "1k"),
    ("int", 1234000, DECIMAL_SI, "1234k"),
    ("int", 1024, BINARY_SI, "1Ki"),
    ("int", 1000000, DECIMAL_EXPONENT, "1e6"),
    ("int", 1024 * 1024, BINARY_SI, "1Mi"),
    # TestNewScaledSet, in nano-units
    ("nanos", 1, DECIMAL_SI, "1n"),
    ("nanos", 1000, DECIMAL_SI, "1u"),
    ("nanos", 1000000, DECIMAL_SI, "1m"),
    ("nanos", 10**9, DECIMAL_SI, "1"),
    ("nanos", 0, DECIMAL_SI, "0"),
]


@pytest.mark.parametrize(("kind", "value", "fmt", "expect"), CONSTRUCT_CASES)
def test_constructors(kind: str, value: int, fmt: str, expect: str) -> None:
    build = {"milli": Quantity.from_milli, "int": Quantity.from_int, "nanos": Quantity.from_nanos}[kind]
    q = build(value, fmt)
    assert str(q) == expect
    assert q.format == fmt
    back = parse_quantity(str(q))
    if kind == "milli":
        assert back.milli_value() == value
    elif kind == "int":
        assert back.value() == value
    else:
        assert back.nanos == value


def test_constructor_defaults_and_validation() -> None:
    assert Quantity.from_int(2).format == DECIMAL_SI
    assert Quantity.from_milli(250).milli_value() == 250
    assert Quantity("250m") == Quantity.from_milli(250)
    assert Quantity() == Quantity.from_int(0)
    with pytest.raises(QuantityError):
        Quantity.from_int(1, "invalidFormat")
    with pytest.raises(TypeError):
        Quantity.from_int(True)
    with pytest.raises(TypeError):
        Quantity.from_milli(1.5)  # type: ignore[arg-type]


# ---------------------------------------------------------------- module helpers and value type

@pytest.mark.parametrize(("value", "expect"), [(2, "2"), (0, "0"), (-3, "-3"), (1000, "1k"), (1024, "1024"),
                                               (MAX_INT64, "9223372036854775807")])
def test_int_input(value: int, expect: str) -> None:
    assert canonical(value) == expect
    assert parse_quantity(value).format == DECIMAL_SI
    assert bytes_value(value) == value
    assert milli_cpu(value) == value * 1000


def test_parse_quantity_types() -> None:
    q = parse_quantity("1Gi")
    assert parse_quantity(q) is q
    with pytest.raises(TypeError):
        parse_quantity(1.5)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        parse_quantity(True)
    with pytest.raises(TypeError):
        parse_quantity(None)  # type: ignore[arg-type]
    with pytest.raises(QuantityError, match="too large"):
        parse_quantity(10**5000)


def test_sign_and_is_zero() -> None:
    assert [parse_quantity(s).sign() for s in ["-1n", "0", "0Ki", "1n"]] == [-1, 0, 0, 1]
    assert parse_quantity("0Mi").is_zero()
    assert not parse_quantity("1n").is_zero()


def test_immutable_copyable_picklable() -> None:
    q = parse_quantity("+1")
    with pytest.raises(AttributeError):
        q._nanos = 5  # type: ignore[misc]
    with pytest.raises(AttributeError):
        q.extra = 1  # type: ignore[attr-defined]
    with pytest.raises(AttributeError):
        del q._format
    assert copy.copy(q) is q
    assert copy.deepcopy({"cpu": q})["cpu"] is q
    restored = pickle.loads(pickle.dumps(q))
    assert (restored.nanos, restored.format, str(restored)) == (q.nanos, q.format, "+1")
    assert repr(parse_quantity("1.5Gi")) == "Quantity('1536Mi', BinarySI)"
