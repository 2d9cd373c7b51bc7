"""Transactional messages (spec §11, docs/transactions.md).

    half_message.py       how a half message is stored, renewed, committed, discarded (pure)
    op_message.py         the op message that records a resolution (pure)
    transaction_table.py  unresolved transactions and the check progress (pure state)
    service.py            TransactionService: the store side, rebuild at start-up
    end_transaction.py    the END_TRANSACTION processor
    checking.py           TransactionCheckService: the check-back rounds

Import the modules themselves: this file re-exports nothing, because `processors/send.py` uses
`half_message` and `end_transaction` uses `processors/send.py` (an eager import here would make
that a cycle).
"""
