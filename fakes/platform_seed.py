"""The in-memory world of ``FakePlatformGateway`` and its deterministic seed.

``build_world(seed, now)`` gives the same ids, texts, upvotes, memberships, read state and chats for the same
seed; only the times move with ``now``, so the ``24h`` and ``7d`` windows always hold posts.

Seed facts tests may rely on (every seed):
Ids are shaped as the platform's (32 lowercase hex, the core refuses anything else): ``platform_id(name)`` of
a readable name, so tests can name them (``platform_id("usr-bob")``).
- users ``alice``, ``bob``, ``carol``, ``dave`` (ids ``platform_id("usr-<handle>")``, emails ``<handle>@sandbox.test``,
  password ``sandbox``), ``olive`` (shares no group with alice) and 44 more members of builders-club;
- ``builders-club`` (id ``platform_id("grp-builders-club")``): every user but olive; 200 posts over 60 days (5 in the
  last 24 h, 20 more within 7 days), labels General, Wins, Questions, Resources (ids
  ``platform_id("lbl-builders-club-general")`` …), 2 pinned posts (one within the week, one older), comments two deep
  (in each group, the post with the most top-level comments has one of them pinned);
- ``quiet-garden``: alice, bob, carol (not dave); 12 posts, 1 pinned, every fourth without a label.
  ``design-guild``: bob, carol, dave, olive (not alice); 8 posts;
- alice's inbox: 45 conversations (bob: 70 messages, carol: 14, dave: 8, 42 members); bob-carol: 6.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass, field
from datetime import datetime, timedelta

PASSWORD = "sandbox"
FIXED = (
    ("alice", "Alice Andersen"),
    ("bob", "Bob Brennan"),
    ("carol", "Carol Castillo"),
    ("dave", "Dave Dimitrov"),
    ("olive", "Olive Ortega"),
)
# Posts with no label (PLATFORM.md: ``labels`` is "" for none): every fourth post of this group, as the
# stand-in seeds them.
UNLABELLED_GROUP = "quiet-garden"
UNLABELLED_EVERY = 4
GROUPS = (  # slug, name, description, labels, member handles (None: all but olive), posts, pinned
    (
        "builders-club",
        "Builders Club",
        "Makers shipping side projects together, one week at a time.",
        ("General", "Wins", "Questions", "Resources"),
        None,
        200,
        2,
    ),
    (
        "quiet-garden",
        "Quiet Garden",
        "Slow gardening, seed swaps and photos.",
        ("General", "Seeds"),
        ("alice", "bob", "carol"),
        12,
        1,
    ),
    (
        "design-guild",
        "Design Guild",
        "Critique circle for interface designers.",
        ("General",),
        ("bob", "carol", "dave", "olive"),
        8,
        0,
    ),
)
READ_SHARE = {"alice": 0.6, "bob": 0.4, "carol": 0.2, "dave": 0.85}
FIRST = (
    "Ava",
    "Ben",
    "Cleo",
    "Dan",
    "Eli",
    "Fay",
    "Gus",
    "Hana",
    "Ivan",
    "Jade",
    "Kai",
    "Lena",
    "Milo",
    "Nia",
    "Omar",
    "Pia",
    "Quinn",
    "Rosa",
    "Sami",
    "Tara",
)
LAST = ("Ames", "Brook", "Cole", "Diaz", "Evans", "Fox", "Gray", "Hale", "Ito", "Jones", "Kerr", "Lund")
TOPICS = (
    "pricing page",
    "landing page",
    "cold outreach",
    "onboarding flow",
    "launch week",
    "newsletter",
    "first customer",
    "waitlist",
    "demo video",
    "MVP scope",
    "referral program",
    "analytics",
)
TITLES = (
    "How I fixed my {t}",
    "Question about {t}",
    "Feedback wanted: {t}",
    "Lessons from my {t}",
    "Anyone tried a new {t}?",
    "My {t} checklist",
    "Win: {t} is live",
    "Stuck on the {t}",
)
SENTENCES = (
    "I spent the weekend on this and learned a lot.",
    "Happy to share the numbers if useful.",
    "What would you change first?",
    "The biggest surprise was how long it took.",
    "Here is what worked and what did not.",
    "Ship small, ship often.",
    "Curious how others approach this.",
    "I will post an update next week.",
)
REPLIES = (
    "Great point!",
    "Thanks for sharing this.",
    "I had the same problem.",
    "Following.",
    "Could you share the template?",
    "Have you tried asking your users?",
    "Congrats!",
)
CHAT = (
    "Hey! Saw your post in the group.",
    "Thanks, that helps a lot.",
    "Are you joining the call?",
    "Sure, send it over.",
    "Let me check and get back to you.",
    "Sounds good!",
    "I just shipped it.",
)


@dataclass(slots=True)
class UserRec:
    id: str
    handle: str
    name: str
    email: str
    password: str


@dataclass(slots=True)
class LabelRec:
    id: str
    name: str


@dataclass(slots=True)
class GroupRec:
    id: str
    slug: str
    name: str
    description: str
    members: set[str]
    labels: list[LabelRec]


@dataclass(slots=True)
class PostRec:
    id: str
    group_id: str
    author_id: str
    title: str
    content: str
    label_id: str
    created_at: datetime
    upvotes: int = 0
    pinned: bool = False
    deleted: bool = False


@dataclass(slots=True)
class CommentRec:
    id: str
    post_id: str
    parent_id: str | None
    author_id: str
    content: str
    created_at: datetime
    upvotes: int = 0
    deleted: bool = False
    pinned: bool = False


@dataclass(slots=True)
class MessageRec:
    id: str
    conversation_id: str
    sender_id: str
    content: str
    created_at: datetime


@dataclass(slots=True)
class ConversationRec:
    id: str
    user_ids: tuple[str, str]
    created_at: datetime
    messages: list[MessageRec] = field(default_factory=list)
    read_upto: dict[str, int] = field(default_factory=dict)  # user id -> messages read (a count)

    def other(self, user_id: str) -> str:
        return self.user_ids[1] if self.user_ids[0] == user_id else self.user_ids[0]


@dataclass(slots=True)
class World:
    users: dict[str, UserRec] = field(default_factory=dict)
    groups: dict[str, GroupRec] = field(default_factory=dict)
    posts: dict[str, PostRec] = field(default_factory=dict)
    comments: dict[str, CommentRec] = field(default_factory=dict)
    reads: dict[str, set[str]] = field(default_factory=dict)  # user id -> ids of posts read
    post_comments: dict[str, list[CommentRec]] = field(default_factory=dict)  # post id -> its comments
    conversations: dict[str, ConversationRec] = field(default_factory=dict)
    counters: dict[str, int] = field(default_factory=dict)

    def next_id(self, prefix: str) -> str:
        self.counters[prefix] = self.counters.get(prefix, 0) + 1
        return platform_id(f"{prefix}-{self.counters[prefix]:05d}")

    def add_comment(self, comment: CommentRec) -> None:
        self.comments[comment.id] = comment
        self.post_comments.setdefault(comment.post_id, []).append(comment)

    def add_conversation(self, a: str, b: str, created_at: datetime) -> ConversationRec:
        conv = ConversationRec(id=self.next_id("cnv"), user_ids=(a, b), created_at=created_at)
        self.conversations[conv.id] = conv
        return conv

    def add_message(self, conv: ConversationRec, sender_id: str, content: str, at: datetime) -> MessageRec:
        message = MessageRec(self.next_id("msg"), conv.id, sender_id, content, at)
        conv.messages.append(message)
        conv.read_upto[sender_id] = len(conv.messages)  # one has read what one sent
        return message


def platform_id(name: str) -> str:
    """The platform-shaped id (32 lowercase hex) the fake world gives the thing named ``name``."""
    return hashlib.md5(name.encode(), usedforsecurity=False).hexdigest()


def _text(rng: random.Random, lo: int, hi: int) -> str:
    return " ".join(rng.sample(SENTENCES, rng.randint(lo, hi)))


def _post_ages(rng: random.Random, count: int) -> list[timedelta]:
    """Five within 24 h, twenty more within the week, the rest up to 60 days old; oldest first."""
    hour = timedelta(hours=1)
    day = timedelta(days=1)
    recent = [rng.uniform(1, 22) * hour for _ in range(min(5, count))]
    week = [day + rng.uniform(1, 143) * hour for _ in range(min(20, count - len(recent)))]
    rest = [rng.uniform(7.1, 60) * day for _ in range(count - len(recent) - len(week))]
    return sorted(recent + week + rest, reverse=True)


def _seed_group(world: World, rng: random.Random, group: GroupRec, count: int, pinned: int, now: datetime) -> None:
    authors = sorted(group.members)
    ages = _post_ages(rng, count)
    # One pinned post inside the newest page (its repeat is removed), the others older.
    pin_at = {len(ages) - 10} if pinned else set()
    while len(pin_at) < pinned:
        pin_at.add(rng.randrange(0, max(1, len(ages) - 40)))
    for i, age in enumerate(ages):
        title = rng.choice(TITLES).format(t=rng.choice(TOPICS))
        post = PostRec(
            id=world.next_id("pst"),
            group_id=group.id,
            author_id=rng.choice(authors),
            title=title,
            content=_text(rng, 1, 3),
            label_id=rng.choice(group.labels).id,
            created_at=now - age,
            upvotes=min(int(rng.paretovariate(1.2)) - 1 + rng.randint(0, 4), 300),
            pinned=i in pin_at,
        )
        if group.slug == UNLABELLED_GROUP and i % UNLABELLED_EVERY == 1:
            post.label_id = ""  # no label, as on the platform (the label drawn above keeps the seed as it was)
        world.posts[post.id] = post
        if rng.random() < 0.55:
            _seed_comments(world, rng, post, authors, now)


def _seed_comments(world: World, rng: random.Random, post: PostRec, authors: list[str], now: datetime) -> None:
    span = min(now - post.created_at, timedelta(days=30)).total_seconds()
    for offset in sorted(rng.uniform(1, span) for _ in range(rng.randint(1, 5))):
        top = CommentRec(
            world.next_id("cmt"),
            post.id,
            None,
            rng.choice(authors),
            rng.choice(REPLIES),
            post.created_at + timedelta(seconds=offset),
            rng.randint(0, 6),
        )
        world.add_comment(top)
        rest = min(now - top.created_at, timedelta(days=5)).total_seconds()
        for later in sorted(rng.uniform(0.5, max(1.0, rest)) for _ in range(rng.choice((0, 0, 1, 2)))):
            at = min(now, top.created_at + timedelta(seconds=later))
            reply = CommentRec(
                world.next_id("cmt"), post.id, top.id, rng.choice(authors), rng.choice(REPLIES), at, rng.randint(0, 3)
            )
            world.add_comment(reply)


def _pin_a_comment(world: World) -> None:
    """Pin the middle top-level comment of the post with the most of them in each group (without the
    generator: the rest of the seed stays as it was)."""
    for group_id in {post.group_id for post in world.posts.values()}:
        tops = {
            post_id: [c for c in world.post_comments.get(post_id, []) if c.parent_id is None]
            for post_id, post in world.posts.items()
            if post.group_id == group_id
        }
        post_id = max(tops, key=lambda pid: (len(tops[pid]), pid))
        if tops[post_id]:
            tops[post_id][len(tops[post_id]) // 2].pinned = True


def _seed_reads(world: World, seed: int) -> None:
    for user_id, user in world.users.items():
        share = READ_SHARE.get(user.handle)
        if share is None:
            continue
        rng = random.Random(f"{seed}:reads:{user.handle}")
        member_of = {g.id for g in world.groups.values() if user_id in g.members}
        world.reads[user_id] = {p.id for p in world.posts.values() if p.group_id in member_of and rng.random() < share}


def _seed_chat(world: World, rng: random.Random, a: str, b: str, count: int, last_at: datetime) -> None:
    times = [last_at]
    for _ in range(count - 1):
        times.append(times[-1] - timedelta(minutes=rng.uniform(1, 360)))
    conv = world.add_conversation(a, b, times[-1] - timedelta(seconds=1))
    for at in reversed(times):
        world.add_message(conv, a if rng.random() < 0.5 else b, rng.choice(CHAT), at)
    for uid in (a, b):  # trailing messages from the other party may be unread
        unread = 0
        if rng.random() < 0.35:
            while unread < len(conv.messages) and conv.messages[-1 - unread].sender_id != uid:
                unread += 1
        conv.read_upto[uid] = len(conv.messages) - unread


def build_world(seed: int, now: datetime) -> World:
    """The whole deterministic world for ``seed``, with times ending at ``now``."""
    rng = random.Random(seed)
    world = World()
    for handle, name in FIXED:
        uid = platform_id(f"usr-{handle}")
        world.users[uid] = UserRec(uid, handle, name, f"{handle}@sandbox.test", PASSWORD)
    names = rng.sample([(f, last) for f in FIRST for last in LAST], 44)
    members = []
    for first, last in names:
        handle = f"{first}-{last}".lower()
        uid = platform_id(f"usr-{handle}")
        world.users[uid] = UserRec(uid, handle, f"{first} {last}", f"{handle}@sandbox.test", PASSWORD)
        members.append(uid)
    for slug, name, description, labels, handles, count, pinned in GROUPS:
        ids = (
            {u for u in world.users if u != platform_id("usr-olive")}
            if handles is None
            else {platform_id(f"usr-{h}") for h in handles}
        )
        group = GroupRec(
            platform_id(f"grp-{slug}"),
            slug,
            name,
            description,
            ids,
            [LabelRec(platform_id(f"lbl-{slug}-{label.lower()}"), label) for label in labels],
        )
        world.groups[group.id] = group
        _seed_group(world, rng, group, count, pinned, now)
    _pin_a_comment(world)
    _seed_reads(world, seed)
    hour = timedelta(hours=1)
    _seed_chat(world, rng, platform_id("usr-alice"), platform_id("usr-bob"), 70, now - 2 * hour)
    _seed_chat(world, rng, platform_id("usr-alice"), platform_id("usr-carol"), 14, now - 72 * hour)
    _seed_chat(world, rng, platform_id("usr-alice"), platform_id("usr-dave"), 8, now - 216 * hour)
    _seed_chat(world, rng, platform_id("usr-bob"), platform_id("usr-carol"), 6, now - 24 * hour)
    for member in members[:42]:
        _seed_chat(
            world,
            rng,
            platform_id("usr-alice"),
            member,
            rng.randint(1, 6),
            now - timedelta(minutes=rng.uniform(10, 180 * 24 * 60)),
        )
    return world
