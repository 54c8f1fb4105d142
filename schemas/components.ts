/**
 * The named schemas: each has an `$id`, is registered once at the root (src/plugins/openapi.ts) and is
 * referenced by `Type.Ref`, so the OpenAPI document lists it under components/schemas and generated clients
 * get a type of that name. The validators see the same schemas with the references put back in place
 * (src/plugins/validation.ts, inlineRefs).
 */
import type { TSchema } from '@sinclair/typebox'
import { FolderBody, FolderList, FolderRecord } from './folder.js'
import { LinkList } from './link-list.js'
import { BulkCreateResult } from './link-bulk.js'
import {
  Geolocation,
  LinkExpirationInput,
  LinkInput,
  LinkPatch,
  LinkRecord,
  PasswordProtectInput,
  PixelInput,
  RotatorEntry,
} from './link.js'
import { CreatePixelBody, Pixel, PixelList, UpdatePixelBody } from './pixel.js'
import { FieldError, Problem } from './problem.js'
import { CreateScriptBody, ScriptList, ScriptRecord, ScriptSummary, UpdateScriptBody } from './script.js'
import { LinkStats, VisitList, WorkspaceStats } from './stats.js'

export const COMPONENT_SCHEMAS: (TSchema & { $id: string })[] = [
  FieldError,
  Problem,
  // The request bodies (those of the link operations are `{link, autofill}` and `{links, autofill}`, written in
  // place: as a named type, `autofill`'s default would make openapi-typescript require it), and what create and
  // update accept in them.
  FolderBody,
  CreatePixelBody,
  UpdatePixelBody,
  CreateScriptBody,
  UpdateScriptBody,
  LinkInput,
  LinkPatch,
  PixelInput,
  Geolocation,
  RotatorEntry,
  LinkExpirationInput,
  PasswordProtectInput,
  // What the API answers.
  LinkRecord,
  BulkCreateResult,
  LinkList,
  FolderRecord,
  FolderList,
  Pixel,
  PixelList,
  ScriptSummary,
  ScriptRecord,
  ScriptList,
  LinkStats,
  WorkspaceStats,
  VisitList,
] as (TSchema & { $id: string })[]
