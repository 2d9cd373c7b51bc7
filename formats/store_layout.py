"""Names in a RocketMQ 4.x store directory (spec §1.1, §7): segment files and config files.

<root>/commitlog/<20-digit offset>           CommitLog segments
<root>/consumequeue/<topic>/<queueId>/<20-digit offset>
<root>/index/<yyyyMMddHHmmssSSS>             IndexFiles (shoal.formats.index_entry)
<root>/config/topics.json, consumerOffset.json, subscriptionGroup.json, delayOffset.json
"""

from __future__ import annotations

from shoal.formats import limits

CONFIG_DIRECTORY_NAME = "config"
TOPICS_FILE_NAME = "topics.json"
CONSUMER_OFFSET_FILE_NAME = "consumerOffset.json"
SUBSCRIPTION_GROUP_FILE_NAME = "subscriptionGroup.json"
DELAY_OFFSET_FILE_NAME = "delayOffset.json"
BACKUP_SUFFIX = ".bak"  # the previous good copy of a config file (ConfigManager.load reads it next)


def offset_to_file_name(offset: int) -> str:
    """`UtilAll.offset2FileName`: 20-digit zero-padded decimal."""
    return f"{offset:0{limits.SEGMENT_FILE_NAME_DIGITS}d}"


def is_segment_name(name: str) -> bool:
    """Whether `name` names a CommitLog or ConsumeQueue segment (20 decimal digits)."""
    return len(name) == limits.SEGMENT_FILE_NAME_DIGITS and name.isdigit()
