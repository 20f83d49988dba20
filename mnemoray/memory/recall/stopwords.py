"""Stopwords per Snowball language, for the keyword index (dropped from its terms) and
for telling a text's language (function words are the surest sign of one).

English keeps the list the index always used (``mnemoray.text.STOPWORDS``: function
words plus chat filler such as "remember", "tell"); the others are short lists of
the most frequent function words. A language without a list keeps every word.
"""

from __future__ import annotations

from mnemoray.text import STOPWORDS as ENGLISH

_TEXT = {
    "german": """
aber alle als also am an auch auf aus bei bin bis bist da damit dann das dass dem den der
des dich die dir doch dort du durch ein eine einem einen einer eines er es etwas euch für
hab habe haben hat hatte ich ihm ihn ihr im in ist ja jetzt kann kein keine mich mir mit
muss nach nicht noch nur ob oder ohne sehr sein seine sich sie sind so über um und uns
unser unter vom von vor war waren warum was weil wenn wer wie wir wird wo zu zum zur
""",
    "french": """
à au aux avec c ce ces cet cette d dans de des du elle elles en est et eu il ils j je l la
le les leur lui m ma mais me mes moi mon n ne nos notre nous on ont ou où par pas pour qu
que qui s sa se ses son sont sur t ta te tes toi ton tu un une vos votre vous y été être
suis es sommes êtes était avoir ai as avons avez
""",
    "spanish": """
a al algo como con de del el ella ellos en es esta este esto está están fue ha hay la las
le les lo los me mi mis muy más no nos o para pero por que qué se si sin sobre su sus también
te tu tus un una uno y ya yo
""",
    "italian": """
a ad al alla alle anche che chi ci come con da dal dalla dei del della delle di e è gli ha
hanno ho i il in io la le lei lo loro lui ma mi mio nel nella non noi o per più questo
quella quello se si sono su sua suo ti tu un una uno
""",
    "dutch": """
aan al als bij dan dat de die dit door een en er had heb heeft hem het hij hoe hun ik in is
je kan maar me met mij mijn naar niet nog nu of om onder ons ook op over te tot u uit van
veel voor was wat we wel wie wij zal ze zich zij zijn zo
""",
    "portuguese": """
a ao aos as com como da das de do dos e ela ele eles em entre era essa esse esta este eu
foi há isso já mais mas me meu minha muito na nas não no nos nós o os ou para pela pelo
por que quem se sem seu sua são também te tem um uma você
""",
}

STOPWORDS: dict[str, frozenset[str]] = {
    "english": ENGLISH,
    **{lang: frozenset(text.split()) for lang, text in _TEXT.items()},
}

# English function words only (no chat filler): the English list is long, so telling
# languages apart by it would favour English.
_ENGLISH_SIGN_TEXT = """
a an and are as at be but by for from have he her his i in is it my not of on or our she
that the their there they this to was we were what when where which who will with you your
"""
_ENGLISH_SIGNS = frozenset(_ENGLISH_SIGN_TEXT.split())
SIGNS: dict[str, frozenset[str]] = {
    "english": _ENGLISH_SIGNS,
    **{k: v for k, v in STOPWORDS.items() if k != "english"},
}

# Letters each language has and English lacks: a second, weaker sign.
LETTERS: dict[str, str] = {
    "german": "äöüß",
    "french": "éèêàçœùëïîâô",
    "spanish": "ñáíóú¿¡",
    "italian": "àèìòù",
    "dutch": "ĳ",
    "portuguese": "ãõçáâêô",
}

# Chinese and Japanese characters so frequent that alone they match nearly everything
# (the bigrams containing them still count).
CJK_STOP_CHARS = frozenset("的了是在和也就都而及与着或之个这那我你他她它们吗呢吧啊の")
