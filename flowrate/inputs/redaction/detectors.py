"""The pattern detectors of `--redact`: each finds the spans of one kind of identifier in a text,
a candidate by a regular expression, kept only when it validates (a checksum, a phone number
the `phonenumbers` library calls valid for a region, an address `ipaddress` parses).

The check digits are python-stdnum's (Luhn, IBAN's mod 97, CPF, CNPJ, INN, SSN's reserved
ranges), not written here; SNILS, which python-stdnum 2.2 lacks, is checked by `snils_valid`.
Names and street addresses need a named-entity model and are not found here (docs/privacy.md)."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Span:
    """A found identifier: `text[start:end]`, of `kind` (the placeholder's type, "EMAIL"), and
    `key`, what makes two mentions the same identifier (an email in lower case, a number's digits)."""

    start: int
    end: int
    kind: str
    key: str


def _digits(text: str) -> str:
    return re.sub(r"\D", "", text)


def _spans(
    pattern: re.Pattern[str], text: str, kind: str, valid: Callable[[str], bool], key: Callable[[str], str] = _digits
) -> Iterator[Span]:
    for match in pattern.finditer(text):
        value = match.group("value") if "value" in pattern.groupindex else match.group(0)
        if valid(value):
            start = match.start("value") if "value" in pattern.groupindex else match.start()
            yield Span(start, start + len(value), kind, key(value))


_EMAIL = re.compile(r"(?<![\w.+-])[\w.+-]+@[\w-]+(?:\.[\w-]+)*\.[^\W\d_]{2,}(?![\w-])")
# a URL whose query or fragment names a secret: the whole URL is replaced
_SECRET_NAMES = (
    "token|access_token|refresh_token|id_token|auth|authorization|key|api_key|apikey|api-key|secret|client_secret"
    "|password|passwd|pwd|sig|signature|x-amz-signature|x-amz-credential|session|sessionid|session_id|sid|code|otp"
)
_SECRET_URL = re.compile(
    rf"\b(?:https?|wss?|ftp)://[^\s<>\"']*?[?&#](?:{_SECRET_NAMES})=[^\s<>\"']*[^\s<>\"'.,;:!?)\]]", re.IGNORECASE
)  # a sentence's full stop after the URL is not part of it
_IBAN = re.compile(r"\b[A-Z]{2}\d{2}(?: ?[A-Z0-9]){11,30}\b")
_CARD = re.compile(r"(?<![\d-])\d(?:[ -]?\d){12,18}(?![\d-])")
_CNPJ = re.compile(r"(?<![\d./-])\d{2}\.?\d{3}\.?\d{3}/?\d{4}-?\d{2}(?![\d-])")
_CPF = re.compile(r"(?<![\d./-])\d{3}\.?\d{3}\.?\d{3}-\d{2}(?![\d-])")
# 11 bare digits are a UK phone number as often as a CPF (two check digits pass one in a hundred): only labelled
_CPF_BARE = re.compile(r"\bCPF\D{0,12}(?P<value>(?<!\d)\d{11})(?!\d)", re.IGNORECASE)
_SNILS = re.compile(r"(?<![\d-])\d{3}-\d{3}-\d{3}[ -]\d{2}(?![\d-])")
_INN_12 = re.compile(r"(?<![\d-])\d{12}(?![\d-])")
# a 10-digit INN has one check digit (one random number in ten passes): only when it is labelled
_INN_10 = re.compile(r"(?:\bINN|ИНН)\D{0,12}(?P<value>(?<!\d)\d{10})(?!\d)", re.IGNORECASE)
_SSN = re.compile(r"(?<![\d-])\d{3}-\d{2}-\d{4}(?![\d-])")
_VERSION_BEFORE = re.compile(r"\b(?:version|ver\.?|v|build|release|versão|versao|версия|версии)\s*$", re.IGNORECASE)
_IPV4 = re.compile(r"(?<![\d.])(?:\d{1,3}\.){3}\d{1,3}(?![\d.])")
_IPV6 = re.compile(r"(?<![\w:])(?:[0-9A-Fa-f]{0,4}:){2,7}[0-9A-Fa-f]{0,4}(?![\w:])")

_MONTHS = (
    "january|february|march|april|may|june|july|august|september|october|november|december"
    "|jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec"
    "|janeiro|fevereiro|março|marco|abril|maio|junho|julho|agosto|setembro|outubro|novembro|dezembro"
    "|января|февраля|марта|апреля|мая|июня|июля|августа|сентября|октября|ноября|декабря"
)
_DATE = (
    r"\d{4}-\d{1,2}-\d{1,2}|\d{1,2}[./-]\d{1,2}[./-]\d{2,4}"
    rf"|\d{{1,2}}(?:st|nd|rd|th)?\s+(?:de\s+)?(?:{_MONTHS})\.?,?\s+(?:de\s+)?\d{{4}}"
    rf"|(?:{_MONTHS})\.?\s+\d{{1,2}}(?:st|nd|rd|th)?,?\s+\d{{4}}"
)
_DOB_LABEL = (
    r"date\s+of\s+birth|birth\s*date|d\.?o\.?b\.?|born(?:\s+on)?|birthday"
    r"|data\s+de\s+nascimento|nascid[oa]\s+em|nasci\s+em"
    r"|дата\s+рождения|родил(?:ся|ась)|д\.\s*р\."
)
_DOB = re.compile(rf"(?:{_DOB_LABEL})\W{{0,4}}(?:is\s+|é\s+|em\s+|on\s+)?(?P<value>{_DATE})", re.IGNORECASE)


def snils_valid(number: str) -> bool:
    """True when the 11 digits of `number` are a Russian SNILS: the control number (the last two
    digits) is the sum of the first nine, each times 9 down to 1, modulo 101 (100 and 101 are 00).
    The numbers up to 001-001-998 were issued before the check existed and are not taken."""
    digits = _digits(number)
    if len(digits) != 11 or int(digits[:9]) <= 1001998:
        return False
    total = sum(int(digit) * weight for digit, weight in zip(digits[:9], range(9, 0, -1)))
    return total % 101 % 100 == int(digits[9:])


def _ip_valid(text: str) -> bool:
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return False
    return address.version == 4 or len(re.findall(r"[0-9A-Fa-f]+", text)) >= 2  # not a bare "::"


def _card_valid(text: str) -> bool:
    from stdnum import luhn

    digits = _digits(text)
    return 13 <= len(digits) <= 19 and digits[0] in "23456" and luhn.is_valid(digits)


def _stdnum(module: str) -> Callable[[str], bool]:
    def valid(text: str) -> bool:
        import importlib

        checker: Any = importlib.import_module(f"stdnum.{module}")
        return bool(checker.is_valid(text))

    return valid


def _lower(text: str) -> str:
    return text.lower()


def _compact(text: str) -> str:
    return re.sub(r"\s", "", text).upper()


@dataclass(frozen=True)
class PatternDetector:
    """One kind of identifier found by `pattern` and kept when `valid`; `key` makes its identity."""

    kind: str
    pattern: re.Pattern[str]
    valid: Callable[[str], bool]
    key: Callable[[str], str] = _digits
    unless: re.Pattern[str] | None = None  #: a match is not taken when the 20 characters before it match this

    def find(self, text: str) -> Iterator[Span]:
        """The spans of `text` this detector finds."""
        for span in _spans(self.pattern, text, self.kind, self.valid, self.key):
            if self.unless is None or not self.unless.search(text[max(0, span.start - 20) : span.start]):
                yield span


def _always(_: str) -> bool:
    return True


# In order of precedence: a span overlapping one found by an earlier detector is not taken.
PATTERN_DETECTORS: tuple[PatternDetector, ...] = (
    PatternDetector("URL", _SECRET_URL, _always, str),
    PatternDetector("EMAIL", _EMAIL, _always, _lower),
    PatternDetector("IBAN", _IBAN, _stdnum("iban"), _compact),
    PatternDetector("DOB", _DOB, _always, _lower),
    PatternDetector("CNPJ", _CNPJ, _stdnum("br.cnpj")),
    PatternDetector("SNILS", _SNILS, snils_valid),
    PatternDetector("CPF", _CPF, _stdnum("br.cpf")),
    PatternDetector("CPF", _CPF_BARE, _stdnum("br.cpf")),
    PatternDetector("SSN", _SSN, _stdnum("us.ssn")),
    PatternDetector("INN", _INN_12, _stdnum("ru.inn")),
    PatternDetector("INN", _INN_10, _stdnum("ru.inn")),
    PatternDetector("CARD", _CARD, _card_valid),
    PatternDetector("IP", _IPV4, _ip_valid, str, _VERSION_BEFORE),
    PatternDetector("IP", _IPV6, _ip_valid, _lower),
)
# what libphonenumber reads as a valid number but is not one: a version (6.3.960017031), a date and
# time (2016-01-03 15), a URL's path segment (weibo.com/1434968493/)
_NOT_A_PHONE = re.compile(r"(?:^|\.)\d\.|\b(?:19|20)\d\d-\d\d-\d\d\b")
_PHONE_DIGITS = re.compile(r"\d(?:[\s().-]{0,3}\d){6}")  # seven digits near each other: a phone may be there


def find_phones(text: str, regions: Sequence[str]) -> Iterator[Span]:
    """The phone numbers of `text` that the `phonenumbers` library finds valid, read as numbers of
    each of `regions` in turn (ISO 3166 codes, "US", "BR", "RU"); a number written with its `+`
    country code is found whatever the region. The key is the number in E.164 form."""
    if not _PHONE_DIGITS.search(text):
        return
    import phonenumbers

    for region in regions:
        for match in phonenumbers.PhoneNumberMatcher(text, region, leniency=phonenumbers.Leniency.VALID):
            if _NOT_A_PHONE.search(match.raw_string) or text[match.start - 1 : match.start] == "/":
                continue
            number = phonenumbers.format_number(match.number, phonenumbers.PhoneNumberFormat.E164)
            yield Span(match.start, match.end, "PHONE", number)


def detector_versions() -> str:
    """The detectors' identity a row records: the pattern set's version and the libraries'."""
    import phonenumbers
    import stdnum

    return f"flowrate-patterns 1; phonenumbers {phonenumbers.__version__}; python-stdnum {stdnum.__version__}"
