"""A generated multi-session conversation dataset with recall ground truth.

Deterministic for a given (users, sessions per user, seed): every random
choice comes from a ``random.Random`` seeded per user with a string, so the
same configuration gives byte-identical files on any machine and Python
version, and the first N users of a bigger dataset are the N users of a
smaller one.

What is generated, per user (all users share one app, so other users are the
distractors that tenant isolation must keep out):

- ``sessions_per_user`` conversations on everyday topics (cooking, code,
  weather, email drafting, budgets, ...): user and assistant turns, tool calls
  with JSON results, filler acknowledgements.
- **Planted facts**, each stated ONCE by the user in one session, in one of
  many surface forms: pets, allergies, diet, family, job, home city,
  hometown, hobby, travel plans, drinks, music, vehicle, languages, health,
  birthday. Some are said in a turn of their own, some inside a turn about
  something else.
- **Changed facts**: a diet / job / city / car stated in one session and
  superseded in a later one ("we just moved from Berlin to Madrid").
- **Near misses**: the user mentions *other people's* facts of the same kind
  ("my coworker just adopted a beagle").

Queries (``queries.jsonl``), each about one planted fact of one user:

- ``paraphrase``: asks in other words; candidates are checked against the
  stating turn with the keyword index's own tokenizer (``mnemoray.text.terms``)
  and one sharing no index term is chosen whenever one exists.
- ``keyword``: shares at least one index term with the stating turn.
- ``changed``: asks for the current value of a changed fact; the answer is the
  NEWER statement (``stale_*`` fields name the superseded one).

Every query row: ``qid, app_name, user_id, query, answer_session_id,
answer_event_ids, answer_text, kind`` plus ``category``, ``surface``,
``answer_aliases``, ``shared_terms`` and, for ``changed``, ``stale_session_id``,
``stale_event_ids``, ``stale_text``.

CLI: ``python benchmarks/datagen.py --users 200 --sessions-per-user 10 --out DIR``
writes ``DIR/archive/part-NNNN.parquet`` (or ``.jsonl`` with ``--format jsonl``,
via ``mnemoray.backfill.archive.write_archive``), ``DIR/queries.jsonl``,
``DIR/facts.jsonl`` (every planted statement) and ``DIR/dataset.json``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import sys
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from mnemoray.backfill.archive import write_archive
from mnemoray.sessions.events import Event
from mnemoray.sessions.session import Session
from mnemoray.text import terms

# Bump when the generated content changes: it is part of the cache key.
GENERATOR_VERSION = 2
DEFAULT_APP = "mnemo-chat"
ASSISTANT = "assistant"
BASE_TS = 1_704_067_200.0  # 2024-01-01T00:00:00Z
USERS_PER_PART = 100


# ---------------------------------------------------------------------------
# Planted-fact catalogue
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Value:
    """One possible value of a fact: ``text`` is what is said and what a hit's
    text must contain (case-insensitive; ``aliases`` count too). ``cls`` picks
    class-specific paraphrases (a bird vs a dog); ``slots`` fill templates."""

    text: str
    cls: str = ""
    aliases: tuple[str, ...] = ()
    slots: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Category:
    name: str
    values: tuple[Value, ...]
    statements: tuple[str, ...]
    # class -> paraphrase queries ("" = any class)
    paraphrases: dict[str, tuple[str, ...]]
    keywords: tuple[str, ...]
    near_misses: tuple[str, ...]
    changes: tuple[str, ...] = ()  # templates with {old}/{new}: a changed fact
    # random extra slots: name -> choices (e.g. a pet's name)
    extra: dict[str, tuple[str, ...]] = field(default_factory=dict)
    alias_slots: tuple[str, ...] = ()  # extra slots that also identify the answer

    @property
    def changeable(self) -> bool:
        return bool(self.changes)


def _v(text: str, cls: str = "", aliases: tuple[str, ...] = (), **slots: str) -> Value:
    return Value(text, cls, aliases, tuple(sorted(slots.items())))


PET_NAMES = (
    "Kiko",
    "Biscuit",
    "Mango",
    "Pepper",
    "Luna",
    "Ziggy",
    "Olive",
    "Noodle",
    "Archie",
    "Pixel",
    "Mochi",
    "Rufus",
    "Clementine",
    "Bowie",
    "Juniper",
    "Waffles",
)
FEMALE = (
    "Maya",
    "Sofia",
    "Amelia",
    "Ingrid",
    "Priya",
    "Chloe",
    "Hannah",
    "Lucia",
    "Nadia",
    "Greta",
    "Yuki",
    "Esme",
    "Rosa",
    "Talia",
    "Imogen",
    "Freya",
)
MALE = (
    "Leo",
    "Mateo",
    "Jonas",
    "Ravi",
    "Elliot",
    "Tomas",
    "Hugo",
    "Felix",
    "Omar",
    "Kenji",
    "Callum",
    "Dmitri",
    "Arlo",
    "Nico",
    "Bram",
    "Silas",
)
WHO = (
    "coworker",
    "neighbour",
    "cousin",
    "best friend",
    "boss",
    "roommate",
    "brother-in-law",
    "colleague",
)
MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)

CATEGORIES: tuple[Category, ...] = (
    Category(
        name="pet",
        values=(
            _v("African Grey", "bird", ("African Gray",)),
            _v("cockatiel", "bird"),
            _v("budgie", "bird", ("budgerigar",)),
            _v("scarlet macaw", "bird"),
            _v("golden retriever", "dog"),
            _v("beagle", "dog"),
            _v("border collie", "dog"),
            _v("dachshund", "dog"),
            _v("Maine Coon", "cat"),
            _v("Siamese", "cat"),
            _v("ragdoll", "cat"),
            _v("bearded dragon", "reptile"),
            _v("leopard gecko", "reptile"),
            _v("corn snake", "reptile"),
            _v("guinea pig", "small"),
            _v("dwarf rabbit", "small"),
        ),
        statements=(
            "My {v} {name} has started chewing through every cable in the flat.",
            "I adopted {a_v} called {name} last spring and honestly it's a handful.",
            "{name}, my {v}, woke me up at 5am again.",
            "I have {a_v} named {name} who absolutely hates the vacuum cleaner.",
            "Just so you know, I share my home with {a_v} called {name}, so nothing fragile "
            "on low shelves.",
            "We got {name}, {a_v}, from a rescue centre two years ago.",
            "My {v} {name} needs a vet check-up next week.",
        ),
        paraphrases={
            "bird": (
                "What kind of bird do I have?",
                "Remind me about that flying animal of mine.",
                "Which feathered companion lives with me?",
                "What species is my winged friend?",
            ),
            "dog": (
                "What breed is my dog?",
                "Which canine do I look after?",
                "What sort of pup do I walk every morning?",
            ),
            "cat": (
                "What breed is my cat?",
                "Which feline shares my place?",
                "What kind of kitty do I own?",
            ),
            "reptile": (
                "What scaly creature do I keep in a terrarium?",
                "Which cold-blooded animal do I own?",
            ),
            "small": (
                "What small furry animal do I keep in a hutch?",
                "Which little critter do I look after?",
            ),
            "": (
                "What animal do I take care of at home?",
                "Which creature lives with me?",
                "Tell me about the animal I own.",
            ),
        },
        keywords=(
            "What did I tell you about {name}?",
            "What breed did I say {name} is?",
            "What's the name of my {v}?",
            "Anything I said about my {v} {name}?",
        ),
        near_misses=(
            "My {who} just adopted {a_v}, which sounds exhausting.",
            "My {who}'s {v} barked at me all evening.",
            "My {who} keeps sending me videos of their {v}.",
        ),
        extra={"name": PET_NAMES},
        alias_slots=("name",),
    ),
    Category(
        name="allergy",
        values=(
            _v("peanuts", aliases=("peanut",)),
            _v("shellfish"),
            _v("sesame"),
            _v("kiwi"),
            _v("strawberries", aliases=("strawberry",)),
            _v("cashews", aliases=("cashew",)),
            _v("soy"),
            _v("mustard"),
        ),
        statements=(
            "I'm allergic to {v}, so please keep that in mind for any recipes.",
            "{V} give me hives, I carry an EpiPen everywhere.",
            "I have a pretty serious {v} allergy.",
            "I can't eat anything with {v} in it, my throat swells up.",
            "Last time I ate {v} I ended up in the ER.",
            "Even a trace of {v} sends me to the hospital.",
        ),
        paraphrases={
            "": (
                "Which food makes me sick?",
                "What ingredient is dangerous for me?",
                "Is there something I must never eat?",
                "What should restaurants leave out of my dish for medical reasons?",
                "What triggers a bad reaction when I eat?",
            )
        },
        keywords=(
            "What am I allergic to?",
            "Which food allergy do I have?",
            "What happens when I eat {v}?",
            "What did I say about {v}?",
        ),
        near_misses=(
            "My {who} is allergic to {v}, so the party menu is tricky.",
            "My {who} reacted badly to {v} at dinner last night.",
        ),
    ),
    Category(
        name="diet",
        values=(
            _v("vegetarian", avoid="meat"),
            _v("vegan", avoid="anything from animals"),
            _v("pescatarian", avoid="red meat or chicken"),
            _v("keto", avoid="bread, pasta or sugar"),
            _v("paleo", avoid="grains or dairy"),
        ),
        statements=(
            "I've been {v} for about five years now.",
            "I'm {v}, so no recipes with {avoid} please.",
            "I follow a strict {v} diet.",
            "I went {v} after college and never looked back.",
            "Being {v}, I skip {avoid} completely.",
        ),
        paraphrases={
            "": (
                "What are my eating habits?",
                "What food restrictions do I follow?",
                "Which way of eating have I chosen?",
                "What meals are off the table for me by choice?",
            )
        },
        keywords=("What diet am I on?", "Am I still {v}?", "What did I say about my diet?"),
        near_misses=(
            "My {who} went {v} last month and won't stop talking about it.",
            "My {who} is {v}, so I'm cooking differently this weekend.",
        ),
        changes=(
            "I stopped being {old}, I'm {new} now.",
            "Quick update: I switched to a {new} diet last month, the {old} thing didn't stick.",
            "These days I'm {new}.",
            "I've gone {new} since the new year.",
        ),
    ),
    Category(
        name="family",
        values=(
            *(_v(n, "daughter") for n in FEMALE[:6]),
            *(_v(n, "son") for n in MALE[:6]),
            *(_v(n, "wife") for n in FEMALE[6:11]),
            *(_v(n, "husband") for n in MALE[6:11]),
            *(_v(n, "sister") for n in FEMALE[11:]),
            *(_v(n, "brother") for n in MALE[11:]),
        ),
        statements=(
            "My {cls} {v} just started a new evening class.",
            "{v}, that's my {cls}, is visiting us this weekend.",
            "I need a gift idea for my {cls} {v}, who loves board games.",
            "My {cls}'s name is {v}, by the way.",
            "I'm picking up my {cls} {v} from the airport on Friday.",
        ),
        paraphrases={
            "daughter": ("What's my little girl called?", "What is my child's name?"),
            "son": ("What's my boy called?", "What is my kid's name?"),
            "wife": ("Who am I married to?", "What's my spouse's name?"),
            "husband": ("Who am I married to?", "What's my spouse's name?"),
            "sister": ("What's my sibling called?", "Who is my sibling?"),
            "brother": ("What's my sibling called?", "Who is my sibling?"),
            "": ("Which relative did I mention by name?",),
        },
        keywords=("What's my {cls}'s name?", "Who is my {cls}?", "What did I say about my {cls}?"),
        near_misses=(
            "My {who}'s kid {v} is staying with us for a night.",
            "My {who} is dating someone called {v}.",
        ),
    ),
    Category(
        name="job",
        values=(
            _v("nurse", place="St. Mary's hospital"),
            _v("software engineer", place="a fintech startup"),
            _v("high-school teacher", aliases=("teacher",), place="Lincoln High"),
            _v("accountant", place="a mid-size audit firm"),
            _v("architect", place="a small design studio"),
            _v("pastry chef", place="a bakery downtown"),
            _v("airline pilot", aliases=("pilot",), place="a regional carrier"),
            _v("veterinarian", place="an animal clinic"),
            _v("electrician", place="a building contractor"),
            _v("journalist", place="the local newspaper"),
            _v("pharmacist", place="a chain drugstore"),
            _v("data analyst", place="an insurance company"),
        ),
        statements=(
            "I work as {a_v} at {place}, mostly long shifts.",
            "I'm {a_v}, so my schedule is all over the place.",
            "Being {a_v} means I'm exhausted by Friday.",
            "I've been {a_v} at {place} for eight years.",
        ),
        paraphrases={
            "": (
                "What do I do for a living?",
                "What's my profession?",
                "How do I earn my income?",
                "What's my occupation?",
            )
        },
        keywords=("What is my job?", "Where do I work?", "What did I say about work?"),
        near_misses=(
            "My {who} works as {a_v} and loves it.",
            "My {who} is retraining to become {a_v}.",
        ),
        changes=(
            "I quit my job as {a_old} and started as {a_new} this month.",
            "Big news: I'm now {a_new}!",
            "I changed careers, I'm working as {a_new} since March.",
        ),
    ),
    Category(
        name="residence",
        values=tuple(
            _v(c)
            for c in (
                "Berlin",
                "Madrid",
                "Lisbon",
                "Toronto",
                "Seattle",
                "Melbourne",
                "Dublin",
                "Prague",
                "Austin",
                "Osaka",
                "Vienna",
                "Copenhagen",
                "Denver",
                "Edinburgh",
            )
        ),
        statements=(
            "I live in {v}, so the weather's been grim lately.",
            "Here in {v} rent is getting ridiculous.",
            "I'm based in {v} at the moment.",
            "My apartment in {v} is tiny but I love the neighbourhood.",
        ),
        paraphrases={
            "": (
                "Which city is home for me?",
                "What town do I reside in?",
                "Where's my current address, city-wise?",
                "Which place do I call home right now?",
            )
        },
        keywords=("Where do I live?", "Which city do I live in?", "Where is my apartment?"),
        near_misses=(
            "My {who} lives in {v} and keeps inviting me over.",
            "My {who} just moved to {v} for work.",
        ),
        changes=(
            "We just moved from {old} to {new}!",
            "I relocated to {new} last month, the {old} chapter is over.",
            "Now that I live in {new}, I need to find a new dentist.",
            "I moved to {new} in the spring.",
        ),
    ),
    Category(
        name="hometown",
        values=tuple(
            _v(c)
            for c in (
                "Porto",
                "Cork",
                "Krakow",
                "Bologna",
                "Tucson",
                "Halifax",
                "Gdansk",
                "Ghent",
                "Leeds",
                "Valparaiso",
                "Nagoya",
                "Adelaide",
            )
        ),
        statements=(
            "I grew up in {v}.",
            "I was born in {v} and lived there until I was eighteen.",
            "Back in {v}, where I'm from, we had the best street food.",
            "My childhood was spent in {v}, right by the harbour.",
        ),
        paraphrases={
            "": (
                "Where was I raised?",
                "What town did I spend my early years in?",
                "Where are my roots?",
                "Which place am I originally from?",
            )
        },
        keywords=(
            "Where did I grow up?",
            "Where was I born?",
            "What did I say about my childhood?",
        ),
        near_misses=("My {who} grew up in {v} too, small world.", "My {who} was born in {v}."),
    ),
    Category(
        name="hobby",
        values=tuple(
            _v(h)
            for h in (
                "rock climbing",
                "watercolor painting",
                "chess",
                "sourdough baking",
                "birdwatching",
                "marathon running",
                "knitting",
                "the cello",
                "surfing",
                "woodworking",
                "pottery",
                "salsa dancing",
            )
        ),
        statements=(
            "I'm completely obsessed with {v} lately.",
            "My favourite way to unwind is {v}.",
            "I spend most Saturdays on {v}.",
            "{V} keeps me sane after work.",
        ),
        paraphrases={
            "": (
                "What do I do in my free time?",
                "What's my favourite pastime?",
                "How do I relax on weekends?",
                "What leisure activity am I into?",
            )
        },
        keywords=(
            "What hobby did I mention?",
            "What do I do to unwind?",
            "What did I say about {v}?",
        ),
        near_misses=(
            "My {who} got really into {v} this year.",
            "My {who} tried to get me into {v}, not for me.",
        ),
    ),
    Category(
        name="travel",
        values=tuple(
            _v(c)
            for c in (
                "Tokyo",
                "Reykjavik",
                "Marrakech",
                "Buenos Aires",
                "Hanoi",
                "Cape Town",
                "Lima",
                "Oslo",
                "Bali",
                "Santorini",
                "Montreal",
                "Istanbul",
            )
        ),
        statements=(
            "I'm flying to {v} in {month} for a friend's wedding.",
            "I booked my trip to {v} for {month}!",
            "In {month} I'll be in {v} for two weeks.",
            "I'm planning a holiday in {v} this {month}.",
        ),
        paraphrases={
            "": (
                "Where am I heading on my upcoming vacation?",
                "Which destination will I visit later this year?",
                "Where is my next journey abroad?",
                "What place am I going to see soon?",
            )
        },
        keywords=(
            "Where am I flying in {month}?",
            "What trip did I book?",
            "When am I going to {v}?",
        ),
        near_misses=(
            "My {who} just got back from {v} and loved it.",
            "My {who} is flying to {v} next week.",
        ),
        extra={"month": MONTHS},
    ),
    Category(
        name="drink",
        values=tuple(
            _v(d)
            for d in (
                "oat milk flat white",
                "black coffee with no sugar",
                "double espresso",
                "chai latte",
                "matcha latte",
                "cold brew",
                "cortado",
                "flat white",
            )
        ),
        statements=(
            "I always order {a_v} in the morning.",
            "My go-to drink is {a_v}.",
            "Nothing beats {a_v} to start the day.",
            "I can't function before my {v}.",
        ),
        paraphrases={
            "": (
                "How do I like my morning caffeine?",
                "What beverage do I start the day with?",
                "What should a barista make for me?",
            )
        },
        keywords=(
            "What's my go-to drink?",
            "What do I order in the morning?",
            "What did I say about my {v}?",
        ),
        near_misses=("My {who} orders {a_v} every single time.",),
    ),
    Category(
        name="music",
        values=tuple(
            _v(m)
            for m in (
                "jazz",
                "heavy metal",
                "K-pop",
                "classical piano",
                "country",
                "reggae",
                "techno",
                "bluegrass",
                "opera",
                "synthwave",
            )
        ),
        statements=(
            "I listen to {v} pretty much all day.",
            "I'm a huge {v} fan.",
            "{V} is the only thing I play while I work.",
            "I've been going to {v} concerts since I was a teenager.",
        ),
        paraphrases={
            "": (
                "What kind of tunes do I enjoy?",
                "What genre is always playing in my headphones?",
                "Which style of songs do I prefer?",
            )
        },
        keywords=(
            "What music do I listen to?",
            "What kind of concerts do I go to?",
            "What did I say about {v}?",
        ),
        near_misses=("My {who} only listens to {v}, it drives me mad.",),
    ),
    Category(
        name="vehicle",
        values=tuple(
            _v(c)
            for c in (
                "Subaru Outback",
                "Tesla Model 3",
                "Honda Civic",
                "Volvo XC60",
                "Toyota Prius",
                "Ford F-150",
                "Vespa scooter",
                "Mini Cooper",
                "VW Golf",
                "Kia Niro",
            )
        ),
        statements=(
            "I drive {a_v}.",
            "My {v} needs new tyres before winter.",
            "I bought a used {v} last year.",
            "The {v} I drive has been super reliable.",
        ),
        paraphrases={
            "": (
                "What car do I have?",
                "What vehicle is parked in my garage?",
                "What do I use to get around town on wheels?",
            )
        },
        keywords=("What do I drive?", "What car did I buy?", "What did I say about my {v}?"),
        near_misses=("My {who} just bought {a_v}.", "My {who} lent me their {v} yesterday."),
        changes=(
            "I sold the {old} and got {a_new}.",
            "Just traded in my {old} for {a_new}.",
            "I drive {a_new} now.",
            "I finally bought {a_new}, so long {old}.",
        ),
    ),
    Category(
        name="language",
        values=tuple(
            _v(x)
            for x in (
                "Portuguese",
                "Japanese",
                "Korean",
                "Italian",
                "Swahili",
                "Mandarin",
                "Greek",
                "Dutch",
                "Turkish",
                "Polish",
            )
        ),
        statements=(
            "I'm learning {v} on Duolingo.",
            "I take {v} classes twice a week.",
            "I've been studying {v} for about a year.",
            "My {v} teacher says my accent is improving.",
        ),
        paraphrases={
            "": ("Which foreign tongue am I studying?", "What am I trying to become fluent in?")
        },
        keywords=(
            "What language am I learning?",
            "What classes do I take?",
            "How is my {v} going?",
        ),
        near_misses=("My {who} speaks fluent {v}.",),
    ),
    Category(
        name="health",
        values=(
            _v("type 1 diabetes", aliases=("diabetes",)),
            _v("asthma"),
            _v("migraines", aliases=("migraine",)),
            _v("a bad knee", aliases=("knee",)),
            _v("celiac disease", aliases=("celiac",)),
            _v("high blood pressure"),
        ),
        statements=(
            "I have {v}, so I have to be careful when I exercise.",
            "My doctor keeps an eye on my {v_bare}.",
            "I've dealt with {v} since I was a kid.",
        ),
        paraphrases={
            "": (
                "Do I have any chronic medical condition?",
                "What health issue do I deal with?",
                "What illness should a trainer know about for me?",
            )
        },
        keywords=(
            "What condition do I have?",
            "What did my doctor say?",
            "What did I say about {v_bare}?",
        ),
        near_misses=("My {who} was just diagnosed with {v}.",),
    ),
    Category(
        name="birthday",
        values=tuple(
            _v(d)
            for d in (
                "March 3rd",
                "July 19th",
                "November 28th",
                "January 11th",
                "May 6th",
                "September 22nd",
                "August 14th",
                "December 2nd",
                "April 30th",
                "June 17th",
            )
        ),
        statements=(
            "My birthday is on {v}.",
            "I turn thirty-five on {v}.",
            "{v} is my birthday, so keep that day free.",
        ),
        paraphrases={
            "": (
                "When do I get a year older?",
                "On what date should you wish me many happy returns?",
                "When's my special day each year?",
            )
        },
        keywords=("When is my birthday?", "What day is my birthday?"),
        near_misses=("My {who}'s birthday is on {v}.",),
    ),
)
CATEGORY_BY_NAME = {c.name: c for c in CATEGORIES}
# Keyword queries when none of a category's shares an index term with the statement.
FALLBACK_KEYWORDS = ("What did I tell you about {v}?", "Anything I mentioned about {v}?")
QUERY_PREFIXES = ("", "", "", "Quick question: ", "Remind me, ", "Hey, ", "Do you remember? ")
STANDALONE_LEADS = (
    "",
    "",
    "By the way, ",
    "Oh, and ",
    "Also, ",
    "Just so you know, ",
    "Random thing, but ",
)
ACKS = (
    "Thanks for telling me, I'll keep that in mind.",
    "Good to know, noted.",
    "Got it, I'll remember that.",
    "Noted! Anything else I can help with?",
    "Understood, thanks for sharing.",
    "That's helpful context, thank you.",
)


# ---------------------------------------------------------------------------
# Filler conversations
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Step:
    """One exchange: a user turn, optionally a tool call, an assistant reply."""

    user: tuple[str, ...]
    reply: tuple[str, ...]
    tool: str | None = None  # key into TOOLS


INGREDIENTS = (
    "chickpeas",
    "salmon",
    "spinach",
    "mushrooms",
    "tofu",
    "sweet potatoes",
    "aubergine",
    "lentils",
    "chicken thighs",
    "halloumi",
    "broccoli",
    "rice noodles",
)
DISHES = (
    "traybake",
    "curry",
    "stir-fry",
    "risotto",
    "frittata",
    "grain bowl",
    "stew",
    "pasta bake",
    "salad",
    "soup",
)
CITIES = (
    "Rome",
    "Amsterdam",
    "Chicago",
    "Barcelona",
    "Singapore",
    "Zurich",
    "Boston",
    "Sydney",
    "Athens",
    "Stockholm",
    "Nairobi",
    "Seoul",
)
BOOKS = (
    ("The Remains of the Day", "Kazuo Ishiguro"),
    ("Station Eleven", "Emily St. John Mandel"),
    ("The Goldfinch", "Donna Tartt"),
    ("Project Hail Mary", "Andy Weir"),
    ("Normal People", "Sally Rooney"),
    ("The Name of the Wind", "Patrick Rothfuss"),
    ("Pachinko", "Min Jin Lee"),
    ("Circe", "Madeline Miller"),
)
APPLIANCES = ("boiler", "washing machine", "fridge", "heating", "front door lock", "shower")
PLANTS = ("tomatoes", "basil", "courgettes", "chillies", "strawberry plants", "lavender")
EVENTS = (
    "dentist appointment",
    "team offsite",
    "parents' evening",
    "car service",
    "quarterly review",
    "book club",
)
MOVIES = (
    "Arrival",
    "Paddington 2",
    "Spirited Away",
    "The Grand Budapest Hotel",
    "Heat",
    "Knives Out",
    "Amelie",
    "Mad Max: Fury Road",
)
CONDITIONS = ("light rain", "sunny spells", "overcast", "thunderstorms", "clear skies", "fog")

TOPICS: dict[str, tuple[Step, ...]] = {
    "cooking": (
        Step(
            (
                "Can you give me a quick dinner idea with {ingredient}?",
                "I have {ingredient} and {ingredient2} in the fridge, what can I make tonight?",
            ),
            (
                "How about a {dish}? Sear the {ingredient}, add garlic and {ingredient2}, and "
                "finish with lemon.",
                "A {dish} would work well with {ingredient} and "
                "{ingredient2}; it takes about {n} minutes.",
            ),
            tool="recipes",
        ),
        Step(
            ("How long does it need in the oven?", "What temperature should the oven be?"),
            (
                "About {n} minutes at 200 degrees, until golden at the edges.",
                "Go for 190 degrees fan for roughly {n} minutes.",
            ),
        ),
        Step(
            ("Can I prep it the night before?", "Will it keep for lunch tomorrow?"),
            (
                "Yes, keep it covered in the fridge and add the sauce just before serving.",
                "It keeps two days in the fridge; reheat it gently.",
            ),
        ),
        Step(
            ("What side would go with it?", "Any idea for a side dish?"),
            (
                "A simple green salad with a mustard dressing works well.",
                "Some crusty bread or rice would round it off.",
            ),
        ),
        Step(
            ("Could you scale it for six people?",),
            (
                "Multiply everything by one and a half and use a bigger tray; cooking time "
                "barely changes.",
            ),
        ),
    ),
    "coding": (
        Step(
            (
                "My Python script throws a KeyError on '{key}' when I parse the JSON.",
                "Why do I get KeyError: '{key}' in my parser?",
            ),
            (
                "That usually means some records lack '{key}'. Use record.get('{key}') or "
                "check with 'in' before reading it.",
            ),
        ),
        Step(
            ("How do I read a CSV with pandas but skip the first {n} rows?",),
            (
                "Use pd.read_csv(path, skiprows={n}); pass header=None if the file has no "
                "header after that.",
            ),
        ),
        Step(
            (
                "The loop over {n}000 rows is really slow, any idea?",
                "How can I speed up this for loop over a dataframe?",
            ),
            (
                "Vectorise it with column operations instead of iterrows; that is usually "
                "10-100x faster.",
            ),
        ),
        Step(
            ("How do I write unit tests for this function?",),
            (
                "Use pytest: create test_{key}.py, call the function with a few inputs and "
                "assert on the outputs.",
            ),
        ),
        Step(
            ("Can you look up the docs for functools.lru_cache?",),
            (
                "It memoises a function's results; maxsize bounds the cache and typed=True "
                "separates 1 and 1.0.",
            ),
            tool="search",
        ),
    ),
    "weather": (
        Step(
            (
                "What's the weather going to be like in {city} this weekend?",
                "Is it going to rain in {city} on Saturday?",
            ),
            ("Expect around {temp} degrees with {condition} on Saturday, a bit cooler on Sunday.",),
            tool="weather",
        ),
        Step(
            ("Should I pack an umbrella?", "Do I need a warm jacket?"),
            (
                "I'd bring a light waterproof, just in case.",
                "A light jacket should be enough during the day.",
            ),
        ),
        Step(
            ("Any museums worth visiting in {city}?", "What should I see in {city} in a day?"),
            (
                "The old town and the main art museum are worth half a day each.",
                "Start with a walking tour, then the central market for lunch.",
            ),
        ),
        Step(
            ("How do I get from the airport to the centre of {city}?",),
            ("The airport train is the fastest, roughly {n} minutes to the centre.",),
        ),
    ),
    "email": (
        Step(
            (
                "Help me write a polite email to my landlord about the broken {appliance}.",
                "Can you draft an email to my landlord, the {appliance} stopped working?",
            ),
            (
                "Sure: 'Dear landlord, I wanted to let you know the {appliance} stopped working "
                "on Monday. Could you arrange a repair this week? Thank you.'",
            ),
        ),
        Step(
            ("Make it a bit firmer.", "Can you make it sound more urgent?"),
            (
                "Here's a firmer version: 'This is the second time I'm raising the "
                "{appliance}; please confirm a repair date by Friday.'",
            ),
        ),
        Step(
            ("Shorten it to three sentences.",),
            ("Done, it now fits in three sentences and keeps the deadline.",),
        ),
        Step(
            ("What subject line should I use?",),
            ("'Repair needed: {appliance}, please confirm a date'.",),
        ),
    ),
    "fitness": (
        Step(
            (
                "Can you make me a {n}-week plan to run my first 5k?",
                "I want to get fitter, where do I start?",
            ),
            (
                "Start with three sessions a week: run one minute, walk two, and add a minute of "
                "running each week.",
            ),
        ),
        Step(
            ("How many rest days should I take?",),
            ("At least two per week; your tendons adapt slower than your lungs.",),
        ),
        Step(
            ("My calves hurt after yesterday's session.", "My legs are sore, is that normal?"),
            ("Some soreness is normal. Stretch gently, and take an easy day before the next run.",),
        ),
        Step(
            ("Should I do strength training too?",),
            ("Yes, two short sessions of squats, lunges and planks help prevent injuries.",),
        ),
    ),
    "budget": (
        Step(
            ("If I save {amount} euros a month, how much will I have in {n} months?",),
            ("That comes to {total} euros, before any interest.",),
            tool="calculator",
        ),
        Step(
            ("What's a good split between needs, wants and savings?",),
            ("The 50/30/20 rule is a good start: half on needs, 30% wants, 20% savings.",),
        ),
        Step(
            ("Should I pay off my credit card first or save?",),
            ("Pay off the high-interest card first; its interest beats any savings rate.",),
        ),
        Step(
            ("Can you help me set up a spreadsheet for monthly expenses?",),
            ("Make columns for date, category, amount and note, then a pivot by category.",),
        ),
    ),
    "books": (
        Step(
            ("Can you recommend a novel similar to {book}?",),
            ("You might enjoy {book2} by {author2}, it has a similar mood.",),
        ),
        Step(
            ("Something shorter, under 300 pages?",),
            ("Try a novella; many of the best ones read in a weekend.",),
        ),
        Step(
            ("Is {book2} available as an audiobook?",),
            ("Yes, and the narration is very well reviewed.",),
            tool="search",
        ),
        Step(
            ("What should I read after that?",),
            ("{book} if you haven't yet, it's a classic of the genre.",),
        ),
    ),
    "movies": (
        Step(
            ("Suggest a film for tonight, something like {movie}.", "What should I watch tonight?"),
            ("How about {movie2}? It has a similar tone and is easy to get into.",),
        ),
        Step(
            ("Is it suitable for a twelve-year-old?",),
            ("Mostly, there are a couple of tense scenes but nothing graphic.",),
        ),
        Step(
            ("Where can I stream it?",),
            ("It's on a couple of the big streaming services this month.",),
            tool="search",
        ),
    ),
    "tech": (
        Step(
            ("My wifi keeps dropping every evening.", "My laptop has become really slow."),
            (
                "Try changing the router channel, evenings are busy on the default one.",
                "Check which apps start at login, that's the usual culprit.",
            ),
        ),
        Step(
            ("How do I check which program is using all the memory?",),
            ("Open the task manager and sort by memory.",),
        ),
        Step(
            ("Can you search for a fix for error code 0x{code}?",),
            ("That error usually means a driver update failed; reinstall the driver.",),
            tool="search",
        ),
        Step(
            ("Should I just buy a new router?",),
            (
                "Only if it's more than five years old; otherwise a firmware update is worth a "
                "try first.",
            ),
        ),
    ),
    "garden": (
        Step(
            ("When should I plant {plant} outside?", "My {plant} look a bit sad, why?"),
            (
                "After the last frost, usually mid-May, in a sunny spot.",
                "Probably too much water; let the soil dry out between waterings.",
            ),
        ),
        Step(
            ("How often should I water them?",),
            ("Every two or three days in summer, less when it's cool.",),
        ),
        Step(
            ("Do they need fertiliser?",),
            ("A liquid feed every two weeks once they start flowering.",),
        ),
    ),
    "calendar": (
        Step(
            (
                "Put the {event} in my calendar for {month} {day}.",
                "Add a reminder for my {event} on {month} {day}.",
            ),
            ("Done, the {event} is in your calendar for {month} {day}.",),
            tool="calendar",
        ),
        Step(
            ("Can you also remind me the day before?",),
            ("Sure, I've added a reminder for the day before at 9am.",),
        ),
        Step(("What else do I have that week?",), ("Nothing else is scheduled that week so far.",)),
    ),
    "currency": (
        Step(
            (
                "How much is {amount} euros in US dollars?",
                "Convert {amount} pounds to euros please.",
            ),
            ("That's roughly {converted} at today's rate.",),
            tool="currency",
        ),
        Step(
            ("Is it better to pay in local currency abroad?",),
            ("Yes, always pay in local currency; dynamic conversion adds a markup.",),
        ),
        Step(
            ("Any card with no foreign transaction fees?",),
            ("Several online banks offer free foreign payments; compare their ATM limits.",),
        ),
    ),
}


def _tool_events(
    tool: str,
    slots: dict[str, str],
    call_id: str,
    rng: random.Random,
) -> tuple[dict[str, Any], Any]:
    """(tool call args, tool response) for one tool use."""
    if tool == "weather":
        return (
            {"city": slots["city"], "days": 2},
            {
                "city": slots["city"],
                "forecast": [
                    {"day": "Sat", "temp_c": int(slots["temp"]), "conditions": slots["condition"]},
                    {
                        "day": "Sun",
                        "temp_c": int(slots["temp"]) - rng.randint(1, 4),
                        "conditions": rng.choice(CONDITIONS),
                    },
                ],
            },
        )
    if tool == "recipes":
        return (
            {"query": slots["ingredient"], "max_minutes": 45},
            {
                "results": [
                    {
                        "title": f"{slots['ingredient'].title()} {slots['dish']}",
                        "minutes": int(slots["n"]),
                    },
                    {
                        "title": f"Quick {slots['ingredient2']} {rng.choice(DISHES)}",
                        "minutes": rng.randint(15, 40),
                    },
                ]
            },
        )
    if tool == "calculator":
        return (
            {"expression": f"{slots['amount']} * {slots['n']}"},
            {"result": int(slots["total"].replace(",", ""))},
        )
    if tool == "currency":
        return (
            {"amount": int(slots["amount"]), "from": "EUR", "to": "USD"},
            {"converted": float(slots["converted"].replace(",", "")), "rate": 1.08},
        )
    if tool == "calendar":
        return (
            {"title": slots["event"], "date": f"{slots['month']} {slots['day']}"},
            {"status": "created", "event_id": f"evt-{call_id[-6:]}"},
        )
    return (
        {"query": slots.get("query", "docs")},
        {"results": [{"title": "Top result", "snippet": "See the official documentation."}]},
    )


def _slots(rng: random.Random) -> dict[str, str]:
    ing, ing2 = rng.sample(INGREDIENTS, 2)
    (book, _), (book2, author2) = rng.sample(BOOKS, 2)
    movie, movie2 = rng.sample(MOVIES, 2)
    amount = rng.choice((50, 100, 150, 200, 250, 300, 400, 500))
    n = rng.randint(3, 12)
    return {
        "ingredient": ing,
        "ingredient2": ing2,
        "dish": rng.choice(DISHES),
        "n": str(n * 5),
        "key": rng.choice(("user_id", "timestamp", "price", "items", "status", "email")),
        "city": rng.choice(CITIES),
        "temp": str(rng.randint(4, 29)),
        "condition": rng.choice(CONDITIONS),
        "appliance": rng.choice(APPLIANCES),
        "amount": str(amount),
        "total": f"{amount * n * 5:,}",
        "converted": f"{amount * 1.08:,.2f}",
        "book": book,
        "book2": book2,
        "author2": author2,
        "movie": movie,
        "movie2": movie2,
        "code": f"{rng.randint(0x1000, 0xFFFF):X}",
        "plant": rng.choice(PLANTS),
        "event": rng.choice(EVENTS),
        "month": rng.choice(MONTHS),
        "day": str(rng.randint(1, 28)),
    }


# ---------------------------------------------------------------------------
# Generation
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class DatasetConfig:
    users: int = 200
    sessions_per_user: int = 10
    seed: int = 7
    app_name: str = DEFAULT_APP
    facts_per_user: int = 6  # stable facts (changed facts come on top)
    changed_per_user: tuple[int, int] = (1, 2)  # min, max
    near_misses_per_user: int = 3
    keyword_fraction: float = 0.5  # stable facts that also get a keyword query

    def fingerprint(self) -> str:
        raw = json.dumps({"v": GENERATOR_VERSION, **asdict(self)}, sort_keys=True)
        return hashlib.sha256(raw.encode()).hexdigest()[:12]


@dataclass
class Dataset:
    config: DatasetConfig
    sessions: list[Session]
    queries: list[dict[str, Any]]
    facts: list[dict[str, Any]]  # every planted statement (stable, old, new, near_miss)

    def stats(self) -> dict[str, Any]:
        return {
            "users": self.config.users,
            "sessions": len(self.sessions),
            "events": sum(len(s.events) for s in self.sessions),
            "queries": len(self.queries),
            "queries_by_kind": dict(sorted(Counter(q["kind"] for q in self.queries).items())),
            "facts_by_role": dict(sorted(Counter(f["role"] for f in self.facts).items())),
        }


def _fill(template: str, slots: dict[str, str]) -> str:
    out = template.format(**slots)
    return out[0].upper() + out[1:] if out else out


def _value_slots(cat: Category, value: Value, rng: random.Random) -> dict[str, str]:
    slots = {
        "v": value.text,
        "V": value.text[0].upper() + value.text[1:],
        "cls": value.cls,
        "a_v": _article(value.text),
        "v_bare": value.text.removeprefix("a ").removeprefix("an "),
    }
    slots.update(dict(value.slots))
    for name, choices in cat.extra.items():
        slots[name] = rng.choice(choices)
    return slots


def _article(text: str) -> str:
    return f"{'an' if text[:1].lower() in 'aeiou' else 'a'} {text}"


def _shared_terms(a: str, b: str) -> list[str]:
    return sorted(set(terms(a)) & set(terms(b)))


def _pick_query(
    rng: random.Random, candidates: list[str], stating_text: str, want_overlap: bool
) -> tuple[str, list[str]]:
    """A paraphrase with no shared index term (or the fewest), or a keyword query
    with at least one; ties broken at random (seeded)."""
    scored = [(q, _shared_terms(q, stating_text)) for q in candidates]
    if want_overlap:
        ok = [s for s in scored if s[1]]
        pool = ok or scored
    else:
        fewest = min(len(s[1]) for s in scored)
        pool = [s for s in scored if len(s[1]) == fewest]
    return rng.choice(pool)


class _SessionBuilder:
    def __init__(
        self, app: str, user: str, session_id: str, start: float, rng: random.Random
    ) -> None:
        self.session = Session(app_name=app, user_id=user, session_id=session_id, created_at=start)
        self.rng = rng
        self.clock = start
        self.invocation = 0

    def _tick(self) -> float:
        self.clock += self.rng.uniform(8.0, 90.0)
        return round(self.clock, 3)

    def _add(self, **kw: Any) -> Event:
        sid = self.session.session_id
        event = Event(
            id=f"{sid}-e{len(self.session.events):03d}",
            session_id=sid,
            invocation_id=f"{sid}-i{self.invocation:02d}",
            timestamp=self._tick(),
            **kw,
        )
        self.session.apply(event)
        return event

    def user(self, text: str) -> Event:
        self.invocation += 1
        return self._add(author="user", role="user", type="message", text=text)

    def reply(self, text: str) -> Event:
        return self._add(author=ASSISTANT, role="model", type="message", text=text)

    def tool(self, name: str, args: dict[str, Any], response: Any) -> None:
        call_id = f"call-{self.session.session_id}-{len(self.session.events):03d}"
        self._add(
            author=ASSISTANT,
            role="model",
            type="tool_call",
            data={"name": name, "args": args, "call_id": call_id},
        )
        self._add(
            author=name,
            role="tool",
            type="tool_result",
            data={"name": name, "response": response, "call_id": call_id},
        )

    def finish(self) -> Session:
        self.session.ended_at = round(self.clock + 60.0, 3)
        return self.session


TOOL_NAMES = {
    "weather": "get_weather",
    "recipes": "search_recipes",
    "calculator": "calculate",
    "currency": "convert_currency",
    "calendar": "create_calendar_event",
    "search": "web_search",
}


@dataclass
class _Plant:
    """A statement to say in a session: a planted fact or a near miss."""

    text: str
    role: str  # stable | old | new | near_miss
    category: str
    value: str
    key: int  # index of the fact in the user's plan (near misses: -1)
    event_id: str = ""
    session_id: str = ""


def _user_plan(
    cfg: DatasetConfig, rng: random.Random
) -> tuple[list[tuple[int, _Plant]], list[dict[str, Any]]]:
    """Which statement goes to which session, and the query specs to write later."""
    m = cfg.sessions_per_user
    placed: list[tuple[int, _Plant]] = []
    specs: list[dict[str, Any]] = []
    changeable = [c for c in CATEGORIES if c.changeable]
    n_changed = rng.randint(*cfg.changed_per_user) if m >= 2 else 0
    changed = rng.sample(changeable, min(n_changed, len(changeable)))
    stable_pool = [c for c in CATEGORIES if c not in changed]
    stable = rng.sample(stable_pool, min(cfg.facts_per_user, len(stable_pool)))
    for cat in stable:
        value = rng.choice(cat.values)
        slots = _value_slots(cat, value, rng)
        text = _fill(rng.choice(cat.statements), slots)
        plant = _Plant(text, "stable", cat.name, value.text, len(specs))
        placed.append((rng.randrange(m), plant))
        specs.append({"category": cat, "value": value, "slots": slots, "plant": plant})
    for cat in changed:
        old, new = rng.sample(cat.values, 2)
        old_slots = _value_slots(cat, old, rng)
        new_slots = {
            **_value_slots(cat, new, rng),
            "old": old.text,
            "new": new.text,
            "a_old": _article(old.text),
            "a_new": _article(new.text),
        }
        i = rng.randrange(m - 1)
        j = rng.randrange(i + 1, m)
        old_plant = _Plant(
            _fill(rng.choice(cat.statements), old_slots), "old", cat.name, old.text, len(specs)
        )
        new_plant = _Plant(
            _fill(rng.choice(cat.changes), new_slots), "new", cat.name, new.text, len(specs)
        )
        placed += [(i, old_plant), (j, new_plant)]
        specs.append(
            {
                "category": cat,
                "value": new,
                "slots": new_slots,
                "plant": new_plant,
                "stale": old_plant,
                "stale_value": old,
            }
        )
    planted_values = {(s["category"].name, s["value"].text) for s in specs}
    planted_values |= {(s["category"].name, s["stale_value"].text) for s in specs if "stale" in s}
    for _ in range(cfg.near_misses_per_user):
        cat = rng.choice([s["category"] for s in specs] or list(CATEGORIES))
        others = [v for v in cat.values if (cat.name, v.text) not in planted_values]
        value = rng.choice(others or list(cat.values))
        slots = {**_value_slots(cat, value, rng), "who": rng.choice(WHO)}
        text = _fill(rng.choice(cat.near_misses), slots)
        placed.append((rng.randrange(m), _Plant(text, "near_miss", cat.name, value.text, -1)))
    return placed, specs


_LOWER_AFTER_LEAD = frozenset(
    {
        "My",
        "Here",
        "Being",
        "Last",
        "Even",
        "Nothing",
        "Back",
        "We",
        "The",
        "These",
        "Quick",
        "Big",
        "Now",
        "In",
        "Just",
    }
)


def _with_lead(lead: str, text: str) -> str:
    """``lead + text``, the text's first word lower-cased unless it is a name or "I"."""
    if not lead or text.lower().startswith(lead.strip(" ,").lower()):
        return text
    first = text.split(" ", 1)[0].rstrip(",:!")
    return lead + (text[0].lower() + text[1:] if first in _LOWER_AFTER_LEAD else text)


def _build_session(b: _SessionBuilder, topic: str, plants: list[_Plant]) -> None:
    rng = b.rng
    steps = list(TOPICS[topic])
    n_steps = rng.randint(min(3, len(steps)), len(steps))
    chosen = steps[:1] + sorted(rng.sample(steps[1:], n_steps - 1), key=steps.index)
    slots = _slots(rng)
    # Where each statement goes: its own turn (+ an ack) before step k, or
    # appended to the user turn of step k.
    where = [(rng.randrange(len(chosen) + 1), rng.random() < 0.5, p) for p in plants]
    for k in range(len(chosen) + 1):
        inline = [p for pos, own, p in where if pos == k and not own and k < len(chosen)]
        for pos, own, p in where:
            if pos == k and (own or k == len(chosen)):
                ev = b.user(
                    _with_lead(rng.choice(STANDALONE_LEADS), p.text)
                    if rng.random() < 0.6
                    else p.text
                )
                p.event_id, p.session_id = ev.id, b.session.session_id
                b.reply(rng.choice(ACKS))
        if k == len(chosen):
            break
        step = chosen[k]
        text = _fill(rng.choice(step.user), slots)
        for p in inline:
            text = f"{text} {p.text}" if rng.random() < 0.5 else f"{p.text} {text}"
        ev = b.user(text)
        for p in inline:
            p.event_id, p.session_id = ev.id, b.session.session_id
        if step.tool:
            name = TOOL_NAMES[step.tool]
            args, response = _tool_events(step.tool, {**slots, "query": text[:60]}, f"{ev.id}", rng)
            b.tool(name, args, response)
        b.reply(_fill(rng.choice(step.reply), slots))


def _with_prefix(prefix: str, query: str) -> str:
    if prefix.endswith(", ") and not query.startswith(("I ", "I'")):
        return prefix + query[0].lower() + query[1:]
    return prefix + query


def _aliases(cat: Category, value: Value, slots: dict[str, str]) -> list[str]:
    """Strings whose presence in a memory's text shows it holds the answer."""
    extra = [slots[name] for name in cat.alias_slots if slots.get(name)]
    return list(dict.fromkeys([value.text, *value.aliases, *extra]))


def _queries_for_user(
    cfg: DatasetConfig, user: str, specs: list[dict[str, Any]], rng: random.Random
) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []

    def emit(kind: str, surface: str, spec: dict[str, Any]) -> None:
        cat: Category = spec["category"]
        value: Value = spec["value"]
        plant: _Plant = spec["plant"]
        if surface == "paraphrase":
            cands = list(cat.paraphrases.get(value.cls, ())) + list(cat.paraphrases.get("", ()))
        else:
            cands = list(cat.keywords)
        filled = [_fill(c, spec["slots"]) for c in cands]
        if surface == "keyword" and not any(_shared_terms(q, plant.text) for q in filled):
            filled = [_fill(c, spec["slots"]) for c in FALLBACK_KEYWORDS]
        query, shared = _pick_query(rng, filled, plant.text, surface == "keyword")
        prefix = rng.choice(QUERY_PREFIXES)
        row: dict[str, Any] = {
            "qid": "",
            "app_name": cfg.app_name,
            "user_id": user,
            "query": _with_prefix(prefix, query),
            "answer_session_id": plant.session_id,
            "answer_event_ids": [plant.event_id],
            "answer_text": value.text,
            "kind": kind,
            "category": cat.name,
            "surface": surface,
            "answer_aliases": _aliases(cat, value, spec["slots"]),
            "shared_terms": _shared_terms(_with_prefix(prefix, query), plant.text),
        }
        if "stale" in spec:
            stale: _Plant = spec["stale"]
            row.update(
                stale_session_id=stale.session_id,
                stale_event_ids=[stale.event_id],
                stale_text=spec["stale_value"].text,
            )
        out.append(row)

    for spec in specs:
        if "stale" in spec:
            emit("changed", rng.choice(("paraphrase", "keyword")), spec)
        else:
            emit("paraphrase", "paraphrase", spec)
            if rng.random() < cfg.keyword_fraction:
                emit("keyword", "keyword", spec)
    return out


def generate_user(
    cfg: DatasetConfig, u: int
) -> tuple[list[Session], list[dict[str, Any]], list[dict[str, Any]]]:
    """One user's sessions, queries and planted statements (independent of other users)."""
    rng = random.Random(f"mnemoray-datagen:{GENERATOR_VERSION}:{cfg.seed}:{u}")
    user = f"u{u:05d}"
    placed, specs = _user_plan(cfg, rng)
    topics = list(TOPICS)
    start = BASE_TS + rng.uniform(0, 30 * 86400)
    sessions: list[Session] = []
    for j in range(cfg.sessions_per_user):
        start += rng.uniform(1.5, 6.0) * 86400
        b = _SessionBuilder(cfg.app_name, user, f"{user}-s{j:02d}", round(start, 3), rng)
        plants = [p for s, p in placed if s == j]
        rng.shuffle(plants)
        _build_session(b, rng.choice(topics), plants)
        sessions.append(b.finish())
    queries = _queries_for_user(cfg, user, specs, rng)
    facts = [
        {
            "user_id": user,
            "session_id": p.session_id,
            "event_id": p.event_id,
            "role": p.role,
            "category": p.category,
            "value": p.value,
            "text": p.text,
        }
        for _, p in sorted(placed, key=lambda sp: (sp[1].session_id, sp[1].event_id))
    ]
    return sessions, queries, facts


def generate(cfg: DatasetConfig) -> Dataset:
    if cfg.users < 1 or cfg.sessions_per_user < 1:
        raise ValueError("users and sessions_per_user must be >= 1")
    sessions: list[Session] = []
    queries: list[dict[str, Any]] = []
    facts: list[dict[str, Any]] = []
    for u in range(cfg.users):
        s, q, f = generate_user(cfg, u)
        sessions += s
        queries += q
        facts += f
    for i, q in enumerate(queries):
        q["qid"] = f"q{i:06d}"
    return Dataset(cfg, sessions, queries, facts)


# ---------------------------------------------------------------------------
# Files
# ---------------------------------------------------------------------------
def _write_jsonl(rows: list[dict[str, Any]], path: Path) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    with tmp.open("w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False, sort_keys=True) + "\n")
    tmp.replace(path)


def write_dataset(ds: Dataset, out: str | Path, fmt: str = "parquet") -> dict[str, Any]:
    """Write archive parts, queries.jsonl, facts.jsonl and (last) dataset.json."""
    out = Path(out)
    archive = out / "archive"
    archive.mkdir(parents=True, exist_ok=True)
    for old in archive.glob("part-*"):
        old.unlink()
    suffix = {"parquet": ".parquet", "jsonl": ".jsonl"}[fmt]
    per_part = USERS_PER_PART * ds.config.sessions_per_user
    parts = []
    for i in range(0, len(ds.sessions), per_part):
        path = write_archive(
            ds.sessions[i : i + per_part], archive / f"part-{i // per_part:04d}{suffix}"
        )
        parts.append(path.name)
    _write_jsonl(ds.queries, out / "queries.jsonl")
    _write_jsonl(ds.facts, out / "facts.jsonl")
    meta = {
        "generator_version": GENERATOR_VERSION,
        "fingerprint": ds.config.fingerprint(),
        "config": asdict(ds.config),
        "format": fmt,
        "archive_parts": parts,
        **ds.stats(),
    }
    # Written last: its presence means the directory is complete (a cache check).
    (out / "dataset.json").write_text(json.dumps(meta, indent=2) + "\n")
    return meta


def read_jsonl(path: str | Path) -> list[dict[str, Any]]:
    with Path(path).open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def load_or_generate(
    cfg: DatasetConfig,
    cache_root: str | Path,
    fmt: str = "parquet",
) -> tuple[Path, dict[str, Any]]:
    """The dataset directory for ``cfg`` under ``cache_root`` (generated on a miss)."""
    out = Path(cache_root) / f"dataset-{cfg.fingerprint()}"
    meta_path = out / "dataset.json"
    if meta_path.exists():
        meta = json.loads(meta_path.read_text())
        if meta.get("format") == fmt:
            return out, meta
    meta = write_dataset(generate(cfg), out, fmt)
    return out, meta


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--users", type=int, default=200)
    p.add_argument("--sessions-per-user", type=int, default=10)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--app-name", default=DEFAULT_APP)
    p.add_argument("--format", choices=("parquet", "jsonl"), default="parquet")
    p.add_argument("--out", required=True, help="output directory")
    args = p.parse_args(argv)
    cfg = DatasetConfig(
        users=args.users,
        sessions_per_user=args.sessions_per_user,
        seed=args.seed,
        app_name=args.app_name,
    )
    t0 = time.perf_counter()
    meta = write_dataset(generate(cfg), args.out, args.format)
    print(
        json.dumps(
            {
                k: meta[k]
                for k in (
                    "fingerprint",
                    "users",
                    "sessions",
                    "events",
                    "queries",
                    "queries_by_kind",
                    "facts_by_role",
                )
            }
        )
    )
    print(f"wrote {args.out} in {time.perf_counter() - t0:.1f}s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
