"""Conversations in English, Portuguese and Russian with planted identifiers of every type
`--redact` finds, and ordinary support text with none: what the redaction tests read."""

# Each planted identifier, as written in the conversations, with the type that must replace it.
PLANTED = {
    "EMAIL": ["maria.silva+suporte@exemplo.com.br", "John.Doe@Example.com", "иван.петров@почта.рф", "ops@acme.io"],
    "PHONE": [
        "(415) 555-2671",
        "+1 212-555-0147",
        "(11) 91234-5678",
        "+55 21 98765-4321",
        "8 (912) 345-67-89",
        "+7 495 123-45-67",
    ],
    "CARD": ["4111 1111 1111 1111", "5555-5555-5555-4444", "378282246310005", "6011111111111117"],
    "IBAN": ["DE89 3704 0044 0532 0130 00", "GB82WEST12345698765432", "PT50 0002 0123 1234 5678 9015 4"],
    "IP": ["192.168.10.24", "8.8.4.4", "2001:db8::8a2e:370:7334", "fe80::1ff:fe23:4567:890a"],
    "URL": [
        "https://shop.example.com/reset?user=42&token=9f8e7d6c5b4a",
        "https://api.example.org/v1/export?api_key=sk_live_51Habc&format=csv",
        "https://files.example.net/report.pdf?X-Amz-Signature=abcdef0123456789",
    ],
    "SSN": ["536-90-4512", "123-45-6789"],
    "CPF": ["529.982.247-25", "11144477735"],
    "CNPJ": ["11.222.333/0001-81", "45723174000110"],
    "INN": ["7707083893", "500100732259"],
    "SNILS": ["112-233-445 95", "123-456-789 64"],
    "DOB": ["12/03/1985", "March 3, 1990", "1979-11-30", "3 de março de 1990", "01.02.1990", "5 марта 1985"],
    "SECRET": [
        "sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z_AbCdEfGh",
        "sk-ant-api03-Zx9yW8vU7tS6rQ5pO4nM3lK2jI1hG0fE_dC-bA9876543210zyxwvutsrqpAA",
        "AKIAIOSFODNN7EXAMPLE",
        "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        "hunter2!Blue",
        "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4ifQ.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c",
        "ghp_1a2B3c4D5e6F7g8H9i0J1k2L3m4N5o6P7q8R",
        "xoxb-1234567890-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
    ],  # fakes in the issuers' shapes (AWS's is its documentation's example)
    "ORDER": ["ORD-884213", "ORD-120045"],  # a rule of the config's own: {pattern: "ORD-\\d{6}", type: ORDER}
    "PROJECT": ["Project Falcon"],  # {term: "project falcon", type: PROJECT}
}
# Identifiers planted in conversation ids, not in their text.
PLANTED_IN_IDS = ["+14155552671"]
RULES = [{"pattern": r"\bORD-\d{6}\b", "type": "ORDER"}, {"term": "project falcon", "type": "PROJECT"}]


def _turn(user, assistant):
    return {"input": user, "actual_output": assistant}


PLANTED_CONVERSATIONS = [
    {
        "id": "en-billing",
        "metadata": {"language": "en", "category": "billing"},
        "turns": [
            _turn(
                "Hi, I was charged twice. My email is John.Doe@Example.com and my phone is (415) 555-2671.",
                "Sorry about that! I can see the account for John.Doe@Example.com. Which card was charged?",
            ),
            _turn(
                "The card 4111 1111 1111 1111, and my wife's 5555-5555-5555-4444. Date of birth: 12/03/1985.",
                "Thanks. For the refund I need your SSN 536-90-4512 confirmed, is that right? Or call +1 212-555-0147.",
            ),
            _turn(
                "Yes. Also my Amex 378282246310005 and Discover 6011111111111117. I was born on March 3, 1990, no wait,"
                " DOB 1979-11-30. The old SSN on file, 123-45-6789, is wrong.",
                "Noted. Orders ORD-884213 and ORD-120045 are refunded. Reach ops@acme.io about Project Falcon.",
            ),
            _turn(
                "The reset link https://shop.example.com/reset?user=42&token=9f8e7d6c5b4a did not work from 192.168.10.24"
                " or from 8.8.4.4, nor https://api.example.org/v1/export?api_key=sk_live_51Habc&format=csv.",
                "Our logs show 2001:db8::8a2e:370:7334 and fe80::1ff:fe23:4567:890a. Try"
                " https://files.example.net/report.pdf?X-Amz-Signature=abcdef0123456789 again. Phone (415) 555-2671?",
            ),
            _turn(
                "I pasted my OpenAI key sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z_AbCdEfGh and the Anthropic one"
                " sk-ant-api03-Zx9yW8vU7tS6rQ5pO4nM3lK2jI1hG0fE_dC-bA9876543210zyxwvutsrqpAA by mistake. AWS:"
                " AKIAIOSFODNN7EXAMPLE, secret access key wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY. My password is"
                " hunter2!Blue.",
                "Please revoke them. The session token eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiw"
                "ibmFtZSI6IkpvaG4ifQ.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c, the GitHub token"
                " ghp_1a2B3c4D5e6F7g8H9i0J1k2L3m4N5o6P7q8R and the Slack bot token"
                " xoxb-1234567890-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx are in the logs too.",
            ),
        ],
    },
    {
        "id": "pt-cadastro",
        "metadata": {"language": "pt-BR", "category": "cadastro"},
        "turns": [
            _turn(
                "Olá, meu CPF é 529.982.247-25 e o e-mail maria.silva+suporte@exemplo.com.br.",
                "Obrigado! Confirme o telefone, por favor.",
            ),
            _turn(
                "Meu celular é (11) 91234-5678, o da empresa +55 21 98765-4321. CNPJ 11.222.333/0001-81.",
                "Certo. Há outro CNPJ, 45723174000110, e o CPF 11144477735 no cadastro. Qual a data de nascimento?",
            ),
            _turn(
                "Data de nascimento: 3 de março de 1990. A conta para o reembolso é PT50 0002 0123 1234 5678 9015 4.",
                "Pronto, o reembolso vai para PT50 0002 0123 1234 5678 9015 4.",
            ),
        ],
    },
    {
        "id": "ru-dostavka",
        "metadata": {"language": "ru", "category": "доставка"},
        "turns": [
            _turn(
                "Здравствуйте, мой телефон 8 (912) 345-67-89, почта иван.петров@почта.рф.",
                "Добрый день! Назовите ИНН организации, пожалуйста.",
            ),
            _turn(
                "ИНН 7707083893, мой личный ИНН 500100732259, СНИЛС 112-233-445 95.",
                "Спасибо. В анкете СНИЛС 123-456-789 64 и дата рождения 01.02.1990, верно?",
            ),
            _turn(
                "Нет, дата рождения 5 марта 1985. Перезвоните на +7 495 123-45-67. IBAN DE89 3704 0044 0532 0130 00"
                " и GB82WEST12345698765432.",
                "Исправили. Перезвоним на 8 (912) 345-67-89.",
            ),
        ],
    },
    {
        "id": "whatsapp:+14155552671",  # a call log's conversation key: an identifier in the id
        "metadata": {"language": "en", "category": "HR"},
        "turns": [_turn("I want to report my manager, Dana, for harassment.", "I am sorry. I will pass this on.")],
    },
]

# Ordinary support sentences with numbers, dates, times, prices and versions, and no identifier.
ORDINARY = [
    "Your order has shipped and should arrive within 3 to 5 business days.",
    "The refund of $49.99 was issued on 2024-03-15 and takes 5-10 days to appear.",
    "Please restart the router, wait 30 seconds, and plug it back in.",
    "We are open Monday to Friday from 9:00 to 17:30, and Saturdays 10:00-14:00.",
    "Version 3.12.1 fixes the sync bug; please update from 3.11.4.",
    "The package weighs 2.5 kg and measures 30 x 20 x 15 cm.",
    "Your subscription renews on 01/04/2025 for 12 months at 9.99 EUR a month.",
    "I have 2 items in my cart, totalling 1,299.00 USD with tax.",
    "The meeting is at 14:30 in room 402 on the 4th floor.",
    "Error code 0x80070005 means access is denied; run the installer as administrator.",
    "We received 1500 tickets last week, 20% more than the week before.",
    "Press 1 for billing, 2 for technical support, or 0 for an agent.",
    "The flight leaves at 06:45 and lands at 09:10 local time.",
    "Set the thermostat to 21 degrees and the timer to 45 minutes.",
    "Your ticket number is 48213 and your case was escalated to tier 2.",
    "The battery lasts about 10 hours and charges fully in 90 minutes.",
    "The warranty covers 24 months from the date of purchase, 12.05.2023.",
    "Download speed was 94.3 Mbps and upload 11.8 Mbps in the last test.",
    "The API returns at most 100 items per page; use page=2 for the next ones.",
    "See https://help.example.com/articles/reset-password?lang=en for the steps.",
    "You can also read https://docs.example.com/v2/guide#install before installing.",
    "I tried 3 times between 8 and 9 pm yesterday and it still failed.",
    "The screen is 15.6 inches with a resolution of 1920x1080.",
    "Use the coupon SPRING24 before March 31 for 15% off.",
    "O pedido foi enviado hoje e chega em até 7 dias úteis.",
    "O reembolso de R$ 120,50 será feito em 2 parcelas.",
    "Nosso horário é das 8h às 18h, de segunda a sexta-feira.",
    "A versão 2.4.0 do aplicativo corrige o erro de login.",
    "Seu protocolo de atendimento é 2024 0315 e o prazo é de 48 horas.",
    "Reinicie o modem e aguarde 2 minutos antes de testar de novo.",
    "A fatura de março venceu no dia 10/03 e tem multa de 2%.",
    "Заказ отправлен, доставка займёт от 3 до 5 рабочих дней.",
    "Возврат 1 500 рублей поступит на карту в течение 10 дней.",
    "Мы работаем с 9:00 до 21:00 без выходных.",
    "Обновите приложение до версии 5.1.2 и перезапустите телефон.",
    "Номер вашей заявки 73125, срок рассмотрения 2 дня.",
    "Тариф стоит 450 рублей в месяц, скорость до 100 Мбит/с.",
    "Курьер приедет 15.04.2024 с 10:00 до 14:00.",
    "The server at 1.2 GHz handles 4 requests in parallel.",
    "Our office moved in 2019 and now has 250 employees.",
    "The version number of win8.1 is 6.3.960017031, the latest one.",  # read by libphonenumber as a BR number
    "The call was made at 2016-01-03 15:39 and nobody answered.",  # read as a US number
    "The screenshot component of version 1.1.0.21 crashes on start.",  # an IPv4 shape
    "See the post at http://weibo.com/help/1434968493/faq for details.",  # a path read as a BR number
    # numbers after an order's, an invoice's or a reference's word, dates and versions: not phones nor IPs
    "Your order #88123456789 has shipped.",
    "Invoice 2024-000123 is attached to this email.",
    "Your invoice INV-2024-000123 is attached, and order ORD-4155552671 too.",  # a code's number
    "Reference 12345678901 is your claim number.",
    "Order 1234567890 shipped yesterday.",
    "Your tracking number is 9400111899223344556677.",
    "O pedido nº 12345678901 foi entregue.",
    "Номер заказа: 89123456789, доставка завтра.",
    "19.1.96.0 is the newest version of the app.",
    "Please install 10.0.19045.3803, the latest update.",
    "The sync ran at 2024.03.15 14:30 and finished.",
    # a password's or a key's words with no credential after them
    "Your password was reset; use the link we sent.",
    "My password is wrong, I think, or the account is locked.",
    "The PIN is printed on the back of the card.",
    "Your API key expires in 30 days; create a new one in settings.",
    "Token authentication failed twice this morning.",
    "I typed pwd /srv/app in the terminal and it printed the folder.",  # a shell command, not a password
    "Minha senha não funciona desde ontem.",
    "Пароль не подходит, хотя я его не менял.",
]
