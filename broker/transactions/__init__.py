"""Transactional messages (spec §11, docs/transactions.md).

    half_message.py       how a half message is stored, renewed, committed, discarded (pure)
    op_message.py         the op message that records a resolution (pure)
    transaction_table.py  unresolved transactions and the check progress (pure state)
    service.py            TransactionService: the store side, rebuild at start-up
    checking.py           TransactionCheckService: the check-back rounds

The END_TRANSACTION processor is `shoal.broker.processors.end_transaction`: processors sit above
the services (pyproject.toml's broker layers). Import the modules themselves: this file
re-exports nothing.
"""
