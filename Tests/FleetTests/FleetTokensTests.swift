import Fleet
import PushCore
import Tracking
import XCTest
