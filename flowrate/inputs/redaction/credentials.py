"""The credentials `--redact` replaces by `<SECRET_n>`: API keys and tokens by the shapes their
issuers give them, and a password, key or token a text labels as one.

The shapes are gitleaks' rules (config/gitleaks.toml, v8, July 2026) and detect-secrets' plugins
(1.5.0, detect_secrets/plugins/), ported rather than depended on: detect-secrets scans lines and
reports the secret's value, not where it is, and its keyword and entropy plugins are made for
source code (`key = value`), where a chat's prose would be taken for secrets; gitleaks is a Go
program. Where a rule fixes a key's exact length, it is loosened to a minimum: a key pasted into a
support chat is often cut, and the issuer's prefix alone (`sk-ant-`, `ghp_`) is what marks it.
Each pattern's source is named beside it."""

from __future__ import annotations

import re

# Characters around a token: a key is not taken from inside a longer word.
_START = r"(?<![\w-])"
_END = r"(?![\w-])"

# The issuers' shapes, each whole match a secret.
TOKEN_PATTERNS: tuple[re.Pattern[str], ...] = (
    # gitleaks anthropic-api-key, anthropic-admin-api-key (sk-ant-api03-, 93 characters and AA)
    re.compile(rf"{_START}sk-ant-[A-Za-z0-9]{{2,8}}\d\d-[A-Za-z0-9_-]{{16,}}"),
    # gitleaks openai-api-key (sk-proj-, sk-svcacct-, sk-admin-, T3BlbkFJ in the middle); detect-secrets openai.py
    re.compile(rf"{_START}sk-(?:proj|svcacct|admin|None)-[A-Za-z0-9_-]{{16,}}"),
    re.compile(rf"{_START}sk-[A-Za-z0-9_-]*T3BlbkFJ[A-Za-z0-9_-]{{16,}}"),
    # gitleaks stripe-access-token; detect-secrets stripe.py
    re.compile(rf"{_START}(?:sk|rk|pk)_(?:test|live|prod)_[A-Za-z0-9]{{10,99}}{_END}"),
    # gitleaks aws-access-token; detect-secrets aws.py (the access key id)
    re.compile(r"\b(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}\b"),
    # gitleaks github-pat, github-oauth, github-app-token, github-refresh-token; detect-secrets github_token.py
    re.compile(rf"{_START}(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{{20,}}{_END}"),
    re.compile(rf"{_START}github_pat_\w{{22,}}"),
    # gitleaks gitlab-pat and the other glxx- tokens; detect-secrets gitlab_token.py
    re.compile(rf"{_START}(?:glpat|gldt|glft|glsoat|glrt|glcbt|glptt|glimt)-[\w-]{{20,}}"),
    # detect-secrets slack.py (xoxa-, xoxb-, xoxp-, xoxo-, xoxs-, xoxr-), gitleaks slack-*-token and slack-app-token
    re.compile(r"\bxox[abposre]-(?:\d+-)+[A-Za-z0-9-]+", re.IGNORECASE),
    re.compile(r"\bxapp-\d-[A-Z0-9]+-\d+-[a-z0-9]+", re.IGNORECASE),
    # detect-secrets slack.py, gitleaks slack-webhook-url
    re.compile(r"https://hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9+/_-]{20,}"),
    # gitleaks jwt (a header and a payload that are base64 JSON objects, "eyJ"); detect-secrets jwt.py
    re.compile(r"\bey[A-Za-z0-9]{17,}\.ey[A-Za-z0-9/\\_-]{17,}\.(?:[A-Za-z0-9/\\_-]{10,}={0,2})?"),
    # gitleaks gcp-api-key
    re.compile(rf"{_START}AIza[\w-]{{35}}{_END}"),
    # gitleaks huggingface-access-token, huggingface-organization-api-token
    re.compile(rf"{_START}(?:hf|api_org)_[A-Za-z]{{34}}{_END}"),
    # gitleaks npm-access-token; detect-secrets pypi_token.py; gitleaks sendgrid-api-token, detect-secrets sendgrid.py
    re.compile(rf"{_START}npm_[A-Za-z0-9]{{36}}{_END}"),
    re.compile(rf"{_START}pypi-AgE[A-Za-z0-9_-]{{50,}}"),
    re.compile(rf"{_START}SG\.[\w-]{{22}}\.[\w-]{{43}}{_END}"),
    # detect-secrets telegram_token.py; gitleaks twilio-api-key
    re.compile(r"(?<![\d:])\d{8,10}:AA[\w-]{33}(?![\w-])"),
    re.compile(rf"{_START}SK[0-9a-fA-F]{{32}}{_END}"),
    # gitleaks private-key; detect-secrets private_key.py (the whole block)
    re.compile(
        r"-----BEGIN[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----[\s\S]*?-----END[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----"
    ),
)

# A label, then what it labels (the value group): a password, a PIN, a key or token named as one.
_IS = r"(?:\s+(?:is|was|é|era|—|->)(?:\s+now)?\s*[:=]?\s*|\s*[:=]\s*|\s+)"  # "is", ":", "=" or a space
_PASSWORD_LABEL = r"(?<![\w/.-])(?:password|passwd|passphrase|passcode|pwd|pin(?:\s+code)?|senha|пароль|пин-?код)\b"
_KEY_LABEL = (
    r"(?<![\w/.-])(?:api[\s_-]?key|secret(?:[\s_-]?(?:access[\s_-]?)?key)?|access[\s_-]?token|auth[\s_-]?token|token"
    r"|client[\s_-]?secret|bearer|chave(?:\s+de\s+api)?|ключ(?:\s+api)?|токен)\b"
)
# detect-secrets aws.py: a secret access key is 40 characters of base64 near "aws" and a key word
AWS_SECRET = re.compile(
    r"(?<![A-Za-z])(?:aws|secret[\s_-]?access[\s_-]?key)[^\n]{0,30}?(?<![A-Za-z0-9/+])(?P<value>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])",
    re.IGNORECASE,
)
QUOTED_SECRET = re.compile(
    rf"(?:{_PASSWORD_LABEL}|{_KEY_LABEL}){_IS}(?P<quote>[\"'“«`])(?P<value>[^\"'”»`\n]+)(?P=quote)?", re.IGNORECASE
)
PASSWORD = re.compile(rf"{_PASSWORD_LABEL}{_IS}(?P<value>[^\s\"'“«`]+?)(?=[.,;:!?)\]]*(?:\s|$))", re.IGNORECASE)
# gitleaks generic-api-key, for prose: a labelled value of 12 or more token characters
LABELLED_KEY = re.compile(
    rf"{_KEY_LABEL}{_IS}(?P<value>[A-Za-z0-9_\-./+=]{{12,}}?)(?=[.,;:!?)\]]*(?:\s|$))", re.IGNORECASE
)


def password_shaped(value: str) -> bool:
    """True when `value`, written after a password's label without quotes, looks like a password
    rather than a word of the sentence ("my password is wrong"): it has a digit, a sign, or a
    capital letter after its first character."""
    return any(char.isdigit() or not char.isalnum() for char in value) or any(char.isupper() for char in value[1:])


def key_shaped(value: str) -> bool:
    """True when `value`, after a key's or token's label, mixes letters and digits as generated
    keys do ("token abc123def456ghi"), not a word ("token authentication")."""
    return any(char.isdigit() for char in value) and any(char.isalpha() for char in value)
